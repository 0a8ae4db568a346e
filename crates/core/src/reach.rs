//! Where an address is: the internet, a private network, this computer, or a place nothing
//! should be sent (link-local cloud metadata and the like). Shared by the OAuth issuer's vouch
//! (`mcp::oauth::vouch`), which keeps a server's issuer within the server's own reach, and the
//! URL consent (`ask::url_policy`), which warns of an address on this computer or the LAN.

/// Where an address is, with the classes rmcp's own metadata fetches refuse or limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Reach {
    /// The internet.
    Public,
    /// A private network (RFC 1918, carrier-grade NAT and so tailnets, unique local IPv6).
    Private,
    /// This computer.
    Loopback,
    /// Never: link-local (cloud metadata services live there), unspecified, "this network",
    /// benchmarking, multicast, broadcast.
    Never,
}

pub(crate) fn reach(ip: std::net::IpAddr) -> Reach {
    use std::net::{IpAddr, Ipv4Addr};
    let ip = match ip {
        // IPv4 carried in IPv6: mapped, NAT64 (64:ff9b::/96) and 6to4 (2002::/16).
        IpAddr::V6(v6) => {
            let s = v6.segments();
            if let Some(v4) = v6.to_ipv4_mapped() {
                IpAddr::V4(v4)
            } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                IpAddr::V4(Ipv4Addr::from(((s[6] as u32) << 16) | s[7] as u32))
            } else if s[0] == 0x2002 {
                IpAddr::V4(Ipv4Addr::from(((s[1] as u32) << 16) | s[2] as u32))
            } else {
                IpAddr::V6(v6)
            }
        }
        ip => ip,
    };
    match ip {
        IpAddr::V4(v4) if v4.is_loopback() => Reach::Loopback,
        IpAddr::V4(v4) if v4.is_private() => Reach::Private,
        // 100.64.0.0/10, shared address space (carrier-grade NAT, Tailscale).
        IpAddr::V4(v4) if v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64 => Reach::Private,
        IpAddr::V4(v4)
            if v4.is_link_local()
                || v4.is_unspecified()
                || v4.octets()[0] == 0
                // 198.18.0.0/15, benchmarking.
                || (v4.octets()[0] == 198 && (v4.octets()[1] & 0xfe) == 18)
                || v4.is_multicast()
                || v4.is_broadcast() =>
        {
            Reach::Never
        }
        IpAddr::V6(v6) if v6.is_loopback() => Reach::Loopback,
        // Unique local (fc00::/7), and site-local (fec0::/10), deprecated but still routed so.
        IpAddr::V6(v6)
            if (v6.segments()[0] & 0xfe00) == 0xfc00 || (v6.segments()[0] & 0xffc0) == 0xfec0 =>
        {
            Reach::Private
        }
        IpAddr::V6(v6)
            if (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6.is_unspecified()
                || v6.is_multicast() =>
        {
            Reach::Never
        }
        _ => Reach::Public,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_told_apart_as_rmcp_tells_them() {
        let at = |s: &str| reach(s.parse().unwrap());
        assert_eq!(at("93.184.216.34"), Reach::Public);
        assert_eq!(at("127.0.0.1"), Reach::Loopback);
        assert_eq!(at("::1"), Reach::Loopback);
        assert_eq!(at("::ffff:127.0.0.1"), Reach::Loopback);
        assert_eq!(at("10.0.0.5"), Reach::Private);
        assert_eq!(at("192.168.1.1"), Reach::Private);
        assert_eq!(at("fd00::1"), Reach::Private);
        assert_eq!(at("169.254.169.254"), Reach::Never);
        assert_eq!(at("fe80::1"), Reach::Never);
        assert_eq!(at("0.0.0.0"), Reach::Never);
        assert_eq!(at("0.1.2.3"), Reach::Never);
        assert_eq!(at("100.100.1.2"), Reach::Private, "a tailnet");
        assert_eq!(at("100.128.0.1"), Reach::Public);
        assert_eq!(at("198.18.0.1"), Reach::Never);
        assert_eq!(
            at("64:ff9b::a9fe:a9fe"),
            Reach::Never,
            "169.254.169.254 by NAT64"
        );
        assert_eq!(at("64:ff9b::7f00:1"), Reach::Loopback);
        assert_eq!(at("2002:a00:5::1"), Reach::Private, "10.0.0.5 by 6to4");
        assert_eq!(at("fec0::1"), Reach::Private, "site-local");
        assert_eq!(at("255.255.255.255"), Reach::Never);
        assert_eq!(at("224.0.0.1"), Reach::Never);
    }
}
