// Package netfault builds a real network for partition tests: every part
// of a deployment (a hub, a runner, Redis, the tabs) in a network
// namespace of its own, on an address of its own, joined by a bridge; a
// test cuts and heals the paths between them, one way or both, and adds
// loss and delay.
//
// Layout. New makes a "switch" namespace holding a bridge; Node makes a
// namespace and a veth pair whose one end (e0, 10.213.0.N/24) is the
// node's only interface and whose other end is a port of the bridge. The
// root namespace gets no address and no route: the 10.213.0.0/24 network
// exists only inside the namespaces of one Net (each Net has its own
// bridge, so two Nets never see each other).
//
// Faults, all applied at the receiving node's INPUT (iptables, in the
// node's namespace, on e0 only), so the sender's kernel sends as usual and
// the packets vanish on the way, without FIN, RST or ICMP:
//
//   - Cut(a, b) drops a→b and b→a; CutOneWay(a, b) only a→b; Heal,
//     HealOneWay and HealAll undo them;
//   - Shape(n, Shaping{Loss, Delay}) drops a share of what n receives at
//     random (the statistic match) and holds the rest for Delay in a delay
//     line of this process (an NFQUEUE queue read over netlink, each
//     packet accepted Delay after it arrived): the kernel here has no
//     netem, and the delay line needs nothing but netfilter.
//
// Processes run in a node with Node.Command (ip netns exec); the test
// process reaches into a node with Node.Dial and Node.Listen (the socket
// is made on a thread switched into the node's namespace, and keeps it),
// and Node.Forward gives a loopback address of the root namespace that
// forwards every connection from the node — so a client that dials
// loopback (the tab client, plain http.Get) talks from the node.
//
// Nothing is left behind: a Net's cleanup kills nothing it did not start
// and deletes its namespaces (their veths, the bridge and the rules go
// with them). Names are "rhnf<pid>x<n>-<node>"; New first deletes the
// namespaces of such names whose process is gone (an earlier run killed
// before its cleanup).
//
// It needs Linux, root, ip (iproute2) and iptables-restore (iptables).
// Elsewhere New skips the test saying why; with CI set it fails instead,
// since CI runs as root on Linux and must never skip these tests.
package netfault
