// Package network gives sandboxes their own network namespace, attached to
// the host by a veth pair, and enforces each sandbox's egress policy with
// nftables rules in the host's network namespace, where nothing inside the
// sandbox can reach them.
//
// # What a sandbox gets
//
// Setup pins a new network namespace as /netns/<id> of the daemon's pin
// namespace (a bind mount of the namespace, like `ip netns add`, made in a
// mount namespace of the daemon's own so that the host's mount table does
// not grow with every sandbox; see pins.go), which the OCI runtime spec
// then names as the sandbox's network namespace, by the path
// /proc/<pid>/task/<tid>/root/netns/<id> (Attachment.NetnsPath). Host root
// creates it, so the sandbox's user namespace does not own it: root inside
// the sandbox has no CAP_NET_ADMIN over its own interfaces, routes or
// firewall, let alone the host's. A /30 of Config.Pool (default
// 10.88.0.0/16) is leased in <StateDir>/network/<id>.json: .1 is the host
// side of the veth pair ("pd" + 10 hex digits of a hash of table and id,
// alias "paddock:<table>:<id>"), .2 is eth0 inside the namespace, whose
// default route goes via .1. Inside, lo is up, IPv6 is disabled and
// net.ipv4.ping_group_range covers every group (the runtime cannot set
// net.* sysctls in a namespace its user namespace does not own); the host
// side has IPv6 disabled and strict reverse-path filtering.
//
// New enables IPv4 forwarding on the host (net.ipv4.ip_forward=1), which
// sandbox traffic needs to leave. That is a host-wide setting: our rules
// only cover traffic from and to sandbox veths, so a host that must not
// route other traffic needs its own forward policy. Conversely, another
// firewall on the host that drops forwarded packets (Docker sets the
// iptables FORWARD policy to DROP) also drops sandbox traffic.
//
// # Offline, then on, then off again
//
// Setup with mode off pins the namespace and brings up lo, nothing more:
// no lease, no rules, no link to the host. Update to allowlist or full
// then attaches that same namespace (the running sandbox keeps its
// processes): a /30 is leased, the rules go in, and only then is the veth
// pair created with its sandbox end inside as eth0. Update to off
// detaches it: the veth pair is deleted from the host side (eth0 vanishes
// with it), the rules, conntrack entries and lease go, and every TCP
// socket in the namespace connected off its loopback is aborted
// (SOCK_DESTROY, like `ss -K`), so programs get ECONNABORTED at once. Root
// inside cannot bring anything back: the namespace belongs to the host's
// user namespace (no CAP_NET_ADMIN inside), and even with it no link to
// the host is left to configure. Every sandbox's resolv.conf names
// Nameserver, the pool's first host address: port 53 to any address goes
// to the resolver once attached; offline, lookups fail at once.
//
// # The rules
//
// Everything lives in one table of family inet, Config.Table, per daemon:
//
//	chain prerouting  (nat, dstnat)   iifname vmap @pre
//	chain input       (filter, 0)     iifname vmap @in
//	                                  iifname @ifaces drop
//	                                  iifname != lo, tcp dport ProxyPort drop
//	                                  iifname != lo, tcp/udp dport DNSPort drop
//	chain forward     (filter, 0)     oifname @ifaces ct state established,related accept
//	                                  oifname @ifaces iifname @ifaces reject
//	                                  oifname @ifaces drop
//	                                  iifname vmap @fwd
//	                                  iifname @ifaces drop
//	chain postrouting (nat, srcnat)   iifname @ifaces masquerade
//	set blocked: 0/8 10/8 100.64/10 127/8 169.254/16 172.16/12 192.0.0/24
//	             192.168/16 224/4 240/4
//
// Each sandbox adds its host-side veth to the set ifaces and to the
// verdict maps pre, in and fwd, which jump to its own chains pre-<id>,
// in-<id> and fwd-<id>; its address entries are in the interval sets
// allow-<id> and deny-<id>. Update rewrites a sandbox's chains and sets in
// one transaction, so no packet ever sees half of a change.
//
// pre-<id> (first packet of each connection): UDP and TCP port 53, to any
// address, go to HostAddr:DNSPort (the daemon's resolver, which answers
// only names the policy allows). In allowlist mode TCP 80, 443 and the
// ports named by name entries ("git.example.com:8443") go to
// HostAddr:ProxyPort unless the destination is denied or allowed by an
// address entry; the proxy reads the original destination with
// SO_ORIGINAL_DST, checks the HTTP Host or TLS SNI against the policy
// (Manager.Policy, via Manager.SandboxByAddr of the source address) and
// resolves the name itself.
//
// in-<id> (anything addressed to a host address, including every other
// sandbox's HostAddr, the host's other interfaces and its loopback
// services, the daemon's API among them): replies to connections the host
// opened are accepted; otherwise only TCP ProxyPort and TCP/UDP DNSPort on
// the sandbox's own HostAddr, from its own address, and only in modes
// other than off. Everything else is refused.
//
// fwd-<id> (every packet forwarded from the sandbox, not only the first,
// so established connections are judged by the current rules): IPv6 and
// packets not from the sandbox's own address are dropped; destinations in
// the pool (other sandboxes) and in deny-<id> are refused; destinations in
// allow-<id> (or its per-port entries) are accepted; in full mode the
// blocked ranges are refused and all else accepted; everything else is
// refused. "Refused" means a TCP reset, or an ICMP administratively
// prohibited error for other protocols, so programs fail at once rather
// than time out; no packet gets through either way.
//
// In short: mode allowlist lets out DNS (to the resolver), the proxied
// ports (to the proxy) and the address entries of Allow; mode full lets
// out everything but the blocked ranges and the host's own addresses,
// unless an address entry of Allow names them; mode off lets out nothing.
// Deny entries win in every mode. IPv6 never leaves a sandbox.
//
// Update also cuts established connections the new policy no longer
// allows: forwarded packets are judged one by one anyway, and the conntrack
// entries of connections that would now go elsewhere (to or away from the
// proxy) or nowhere are deleted, so both ends see a reset at their next
// packet. Connections the egress proxy carries are the proxy's to cut: it
// must re-check them against the new Policy.
//
// # Threat model
//
// The sandbox is hostile and may hold root inside its user namespace. It
// can send any packet its eth0 lets it send; it cannot change anything
// outside its namespace. The enforcement points are all on the host side:
// the rules above (evaluated in the host's network namespace, on the
// host-side veth), the proxy and the resolver. Spoofed source addresses
// are dropped, so a sandbox cannot pass as another one to the proxy;
// traffic between sandboxes is dropped; the host's services are out of
// reach whatever address they listen on, except the proxy and the
// resolver, which in turn are out of reach from everywhere but sandboxes
// and loopback. The daemon must be the only writer of its table.
//
// # Recovery
//
// The kernel state (namespace pins, veths, the table) outlives the daemon;
// the pin namespace is pinned on the host at <StateDir>/netns.mnt, which a
// restart joins; leases persist the rest on disk. New re-reads the leases and re-applies their
// rules. List finds every trace (pinned namespace, lease, veth by alias,
// chain or set), and Teardown removes whatever exists of them.
package network
