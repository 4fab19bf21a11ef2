fn main() {
    eprintln!("zlrouter: the data plane is not built yet");
    std::process::exit(2);
}
