// Package egress is the host side of a sandbox's network: the transparent
// proxy every allowed TCP connection goes through, the DNS server sandboxes
// ask, the substitution of secrets into requests, and the per-sandbox
// connection and bandwidth limits.
//
// Package network puts each networked sandbox in its own namespace behind a
// veth pair and DNATs the sandbox's TCP 80 and 443 to the listener given to
// Proxy.ServeTCP and its UDP/TCP 53 to Proxy.ServeDNS and
// Proxy.ServeDNSTCP. The proxy learns who is connecting from the source
// address (Config.Lookup) and where the sandbox meant to go from conntrack
// (OriginalDst).
//
// # Decisions
//
// On port 443 the proxy reads the TLS ClientHello (at most 16 KiB, within
// Config.PeekTimeout) and takes the SNI; on port 80 it reads the first
// request head (at most 32 KiB) and takes Host. The name must match the
// sandbox's Rules (see Rules and MatchHost). The proxy then resolves the
// name itself, drops answers in special ranges (private, loopback,
// link-local including the 169.254.169.254 metadata service, CGNAT,
// multicast, unspecified, IPv4-embedding IPv6 ranges, Config.Blocked)
// unless an Allow CIDR covers them, connects to what is left on the
// original port and replays the bytes it read. A connection that names no
// host, or names an IP literal, goes to that address only if an Allow CIDR
// covers it (or, in ModeFull, if the address is not special). Other ports
// carry no name, so only CIDR entries can allow them. Above the sandbox's
// Rules sits the operator's Ceiling (Config.Ceiling): an address in a
// special range the operator has not opened, one of the host's own or
// one of the sandbox pool is refused for every answer and every raw
// connection, whatever the Rules allow; the API checks tenants' Allow
// entries against the same Ceiling (Ceiling.CheckRules).
//
// TLS is spliced untouched, end to end between the sandbox and the real
// server, except for hosts a secret is bound to. Plain HTTP is parsed
// request by request (HTTP/1.1, keep-alive, streamed bodies), and every
// request on a connection must name the host the connection was allowed
// for.
//
// PolicyChanged re-checks a sandbox's live connections against its new
// rules and closes those no longer allowed before it returns; CloseSandbox
// closes them all.
//
// # Secrets
//
// A sandbox holds a Placeholder, never a secret's value. For a TLS
// connection whose SNI is a host the secret is bound to, the proxy
// terminates TLS with a certificate for that name signed by the per-daemon
// CA (NewCA; the sandbox's trust store holds it), reads the HTTP/1.1
// requests, replaces the sandbox's placeholders in header values with the
// values, and forwards them over TLS it verifies against
// Config.UpstreamRoots. The Host header must equal the SNI, so a shared
// front end cannot route the value to another site. Response headers and
// uncompressed response bodies have the value masked on the way back.
// Plain HTTP to a bound host is substituted only where the secret allows
// it (Secret.AllowPlainHTTP); by default it is forwarded untouched. Toward
// any other host the placeholder is just a string.
//
// # Threat model
//
// The sandbox is hostile, root inside, and may send anything: it chooses
// its packets' destinations, ignores or forges DNS answers, and controls
// SNI, Host headers and every byte of every request. The proxy and the
// rules live outside its namespace, so nothing it does changes them. What
// the proxy defends:
//
//   - Allowlist bypass by address: the destination IP the sandbox chose is
//     never trusted for a named connection; the proxy connects only where
//     its own resolution of the allowed name points.
//   - DNS rebinding and internal targets: answers in special ranges
//     (metadata service, host loopback, private networks, Config.Blocked
//     for the host's own addresses) are refused unless explicitly allowed
//     by CIDR, and never beyond the operator's Ceiling, for both the TCP
//     proxy and the DNS server.
//   - Resource exhaustion: Config.MaxConnsPerSandbox caps live connections
//     (over the cap they are closed at once, nothing is resolved or
//     dialled), reads before a decision are bounded in size and time,
//     Config.BytesPerSecond caps bandwidth per direction, the DNS server
//     bounds its concurrent work and answers disallowed names without any
//     upstream query.
//   - Request smuggling toward an upstream: parsed requests are re-framed
//     by net/http (one Content-Length or chunked encoding, never both), so
//     what the upstream parses is what the proxy checked.
//   - Log flooding: refusals are logged at most 50 a second.
//   - Secret theft: the value is sent only inside verified TLS to a bound
//     host (or plain HTTP if the secret allows it), only in headers of
//     requests whose Host is that host, and only in place of the sandbox's
//     own placeholder. Proxy-generated errors never contain it; response
//     headers and identity-encoded bodies have it masked.
//
// What it does not defend, by design or yet:
//
//   - Domain fronting through TLS: spliced TLS is opaque, so a sandbox
//     allowed one name on a shared front end (a CDN) can ask that front end
//     for another site inside the encrypted stream. Allow names, not
//     shared front ends, where that matters.
//   - An allowed upstream is a channel: whatever an allowed site accepts
//     (uploads, paste sites) can carry data out.
//   - A bound upstream that reflects the secret in a transformed form
//     (compressed, encoded, split) is not masked; bind secrets only to
//     hosts that are meant to receive them.
//   - Placeholders in request URLs or bodies are not substituted, only in
//     header values.
//   - HTTP/2 is not spoken where the proxy terminates TLS (it offers only
//     http/1.1 via ALPN); spliced TLS carries whatever the two ends agree.
package egress
