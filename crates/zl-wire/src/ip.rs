//! What IPv4 and IPv6 share, below both headers' modules and the parse that calls them.

/// Whether the packet is a fragment (IPv4 MF / offset, or an IPv6 fragment header that is not
/// atomic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fragment {
    /// A whole datagram (including an RFC 6946 atomic fragment).
    #[default]
    None,
    /// Offset 0, more fragments follow: the upper-layer header is present.
    First,
    /// A later fragment: no upper-layer header.
    Later,
}
