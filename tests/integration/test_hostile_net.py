"""Hostile code vs. the host's network (DESIGN.md invariant 3).

The test listens on the host (all addresses, v4 and v6, and an abstract
unix socket); code inside tries every host address. The sandbox has its own
network namespace with only `lo`, so:

- 127.0.0.1 / ::1 reach the sandbox's own loopback, where nothing listens:
  ECONNREFUSED (not the host's listener);
- every other host address has no route at all: ENETUNREACH;
- the host's abstract unix socket lives in the host's network namespace:
  ECONNREFUSED (CVE-2020-15257, containerd-shim);
and the host listener never accepts a connection.
"""
import os
import socket
import unittest
import uuid

from harness import DaemonTest
from hostile_util import (host_ipv4_addrs, host_ipv6_addrs, probe_one, put_probe, py,
                          run_probe, sh_ok)

ASAN_SUBSET = False


class HostNetworkUnreachable(DaemonTest):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.v4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        cls.v4.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        cls.v4.bind(("0.0.0.0", 0))
        cls.v4.listen(16)
        cls.port = cls.v4.getsockname()[1]
        cls.v6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        cls.v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        cls.v6.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            cls.v6.bind(("::", cls.port))
            cls.v6.listen(16)
        except OSError:
            cls.v6.close()
            cls.v6 = None
        cls.abstract = "\0sbx-host-" + uuid.uuid4().hex
        cls.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        cls.unix.bind(cls.abstract)
        cls.unix.listen(16)
        for s in (cls.v4, cls.v6, cls.unix):
            if s is not None:
                s.setblocking(False)

    @classmethod
    def tearDownClass(cls):
        for s in (cls.v4, cls.v6, cls.unix):
            if s is not None:
                s.close()
        super().tearDownClass()

    def setUp(self):
        self.sid = self.d.create()
        put_probe(self.d, self.sid)

    def assertNothingAccepted(self):
        for s in (self.v4, self.v6, self.unix):
            if s is None:
                continue
            try:
                conn, addr = s.accept()
            except BlockingIOError:
                continue
            conn.close()
            self.fail("the host listener accepted a connection from %r" % (addr,))

    def test_host_listener_works_from_the_host(self):
        # The control: the listener is real and reachable outside.
        c = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        c.close()
        import select
        select.select([self.v4], [], [], 5)
        conn, _ = self.v4.accept()
        conn.close()

    def test_loopback_is_the_sandboxs_own(self):
        for user in ("user", "root"):
            self.assertEqual(probe_one(self, self.sid, "connect", "127.0.0.1", self.port,
                                       user=user), "ECONNREFUSED")
            self.assertEqual(probe_one(self, self.sid, "connect", "127.0.0.2", self.port,
                                       user=user), "ECONNREFUSED")
            self.assertEqual(probe_one(self, self.sid, "connect", "::1", self.port, user=user),
                             "ECONNREFUSED")
        self.assertNothingAccepted()
        # The sandbox's loopback works for the sandbox itself.
        out = py(self, self.sid,
                 "import socket\ns=socket.socket(); s.bind(('127.0.0.1', %d)); s.listen()\n"
                 "c=socket.create_connection(('127.0.0.1', %d)); a,_=s.accept()\n"
                 "c.sendall(b'ping'); print(a.recv(4).decode())" % (self.port, self.port))
        self.assertEqual(out, "ping\n")
        self.assertNothingAccepted()

    def test_host_addresses_unreachable(self):
        v4 = host_ipv4_addrs()
        v6 = host_ipv6_addrs()
        self.assertTrue(v4 or v6, "the host has no non-loopback address to try")
        targets = v4 + v6 + ["169.254.169.254", "10.0.0.1", "8.8.8.8"]
        for ip in targets:
            for user in ("user", "root"):
                self.assertEqual(probe_one(self, self.sid, "connect", ip, self.port, user=user),
                                 "ENETUNREACH", ip)
        # UDP too: sendto has no route either.
        code = ("import socket,errno,sys\nout=[]\nfor ip in sys.argv[1:]:\n"
                " fam=socket.AF_INET6 if ':' in ip else socket.AF_INET\n"
                " s=socket.socket(fam, socket.SOCK_DGRAM)\n"
                " try: s.sendto(b'x',(ip,%d)); out.append('sent')\n"
                " except OSError as e: out.append(errno.errorcode[e.errno])\n"
                "print(' '.join(out))" % self.port)
        res = self.d.exec(self.sid, argv=["/usr/bin/python3", "-c", code] + targets)
        self.assertEqual(res["stdout"].split(), ["ENETUNREACH"] * len(targets), res)
        self.assertNothingAccepted()

    def test_host_abstract_socket_unreachable(self):
        code = ("import socket,errno,sys\ns=socket.socket(socket.AF_UNIX)\n"
                "try: s.connect(sys.argv[1].replace('@','\\0',1)); print('ok')\n"
                "except OSError as e: print(errno.errorcode[e.errno])")
        for user in ("user", "root"):
            res = self.d.exec(self.sid, argv=["/usr/bin/python3", "-c", code,
                                              "@" + self.abstract[1:]], user=user)
            self.assertEqual(res["stdout"], "ECONNREFUSED\n", res)
        self.assertNothingAccepted()

    def test_only_lo(self):
        for user in ("user", "root"):
            self.assertEqual(run_probe(self, self.sid, "ifaces", user=user), ["lo"])
        dev = sh_ok(self, self.sid, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
        self.assertEqual(dev, "lo\n")
        routes = sh_ok(self, self.sid, "tail -n +2 /proc/net/route")
        self.assertEqual(routes, "")
        # lo is up, with the loopback addresses only.
        self.assertEqual(sh_ok(self, self.sid, "cat /proc/net/if_inet6 | awk '{print $6}'"),
                         "lo\n")
        # No DNS server configured, and no way to reach one.
        self.assertNotIn("nameserver", sh_ok(self, self.sid, "cat /etc/resolv.conf"))

    @unittest.skipUnless(os.path.exists("/usr/sbin/ip") or os.path.exists("/usr/bin/ip"),
                         "iproute2 is not installed on the host (the sandbox's /usr)")
    def test_network_admin_refused(self):
        # Root inside cannot add an address or bring up an interface: no
        # CAP_NET_ADMIN even over its own network namespace.
        for cmd in ("ip link add dummy0 type dummy", "ip addr add 10.9.9.9/24 dev lo",
                    "ip route add default dev lo"):
            res = self.d.sh(self.sid, cmd, user="root")
            self.assertEqual(res["exit_code"], 2, (cmd, res))
            self.assertIn("Operation not permitted", res["stderr"], cmd)
        self.assertEqual(sh_ok(self, self.sid, "tail -n +2 /proc/net/route"), "")


if __name__ == "__main__":
    unittest.main()
