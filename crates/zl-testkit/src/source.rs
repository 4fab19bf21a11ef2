//! Reading Rust source as text, for the tests that check rules in the code itself (no lock on
//! the packet path: `zl-dataplane/tests/packet_path_locks.rs`,
//! `zl-afxdp/tests/packet_path_locks.rs`).

/// The text of the function whose signature starts with `start` (its first match in
/// `source`), from the signature to its closing brace; `None` when there is no such function.
pub fn fn_body<'a>(source: &'a str, start: &str) -> Option<&'a str> {
    let at = source.find(start)?;
    let open = at + source[at..].find('{')?;
    let mut depth = 0usize;
    for (i, c) in source[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&source[at..open + i + 1]);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_ends_at_its_own_closing_brace() {
        let src = "fn recv(x: u32) {\n    if x > 0 {\n        y();\n    }\n}\nfn other() {}\n";
        assert_eq!(
            fn_body(src, "fn recv("),
            Some("fn recv(x: u32) {\n    if x > 0 {\n        y();\n    }\n}")
        );
        assert_eq!(fn_body(src, "fn other("), Some("fn other() {}"));
        assert_eq!(fn_body(src, "fn missing("), None);
        assert_eq!(fn_body("fn open() {\n", "fn open("), None);
    }
}
