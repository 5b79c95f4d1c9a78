#!/usr/bin/env python3
"""The vm tier's choice of accelerator (tests/vm/vm_accel.py), with stand-ins
for qemu: a KVM that boots the guest, one that takes the guest and never runs
it (a PVM host: "Booting from ROM..." and nothing more), one that stops with
an internal error, and a /dev/kvm that cannot be opened. No qemu or KVM
needed: each stand-in is a shell script that behaves like qemu did there."""
import os
import stat
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "vm"))
from vm_accel import choose_accel, kvm_boots  # noqa: E402

TCG = "tcg,thread=single"

# What qemu printed on this project's hosts, or should print.
BOOTS = 'echo "SeaBIOS (version 1.16.2)"; sleep 0.3; echo "[    0.000000] Linux version 6.12.117"; sleep 30'
HANGS = 'echo "SeaBIOS (version 1.16.2)"; echo "Booting from ROM..."; exec sleep 600'
FAILS = 'echo "KVM internal error. Suberror: 1"; echo "emulation failure"; exec sleep 600'
EXITS = 'echo "qemu-system-x86_64: failed to initialize kvm: Permission denied"; exit 1'


class AccelTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="nltest-accel.")
        self.kernel = os.path.join(self.dir.name, "vmlinuz")
        open(self.kernel, "w").close()
        self.kvm_dev = os.path.join(self.dir.name, "kvm")
        open(self.kvm_dev, "w").close()

    def tearDown(self):
        self.dir.cleanup()

    def qemu(self, body):
        """A stand-in qemu; it records its pid so the test can see it was killed."""
        path = os.path.join(self.dir.name, "qemu")
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\necho $$ > {self.dir.name}/pid\n{body}\n")
        os.chmod(path, stat.S_IRWXU)
        return path

    def assert_gone(self):
        with open(os.path.join(self.dir.name, "pid")) as f:
            pid = int(f.read())
        # Killed and reaped by the probe, whatever the guest did.
        with self.assertRaises(ProcessLookupError, msg=f"qemu stand-in {pid} still there"):
            os.kill(pid, 0)

    def test_a_kvm_that_boots_the_guest_is_used_with_tcg_behind_it(self):
        accel, kvm, why = choose_accel(self.qemu(BOOTS), self.kernel, TCG, kvm_dev=self.kvm_dev, timeout=10)
        self.assertTrue(kvm, why)
        self.assertEqual(accel, ["-accel", "kvm", "-accel", TCG])
        self.assertIn("banner", why)
        self.assert_gone()

    def test_a_kvm_that_hangs_the_guest_falls_back_to_tcg_within_the_probe(self):
        t0 = time.monotonic()
        accel, kvm, why = choose_accel(self.qemu(HANGS), self.kernel, TCG, kvm_dev=self.kvm_dev, timeout=2)
        self.assertFalse(kvm)
        self.assertEqual(accel, ["-accel", TCG])
        self.assertIn("hung", why)
        self.assertIn("Booting from ROM", why)
        self.assertTrue(why.endswith(": TCG"), why)
        # The probe's own bound, not the guest's 310 s deadline (a bound of the
        # probe's design, not of this host's speed: the stand-in never prints).
        self.assertLess(time.monotonic() - t0, 60)
        self.assert_gone()

    def test_a_kvm_internal_error_falls_back_to_tcg(self):
        accel, kvm, why = choose_accel(self.qemu(FAILS), self.kernel, TCG, kvm_dev=self.kvm_dev, timeout=10)
        self.assertFalse(kvm)
        self.assertEqual(accel, ["-accel", TCG])
        self.assertIn("KVM internal error", why)

    def test_a_qemu_that_exits_falls_back_to_tcg(self):
        accel, kvm, why = choose_accel(self.qemu(EXITS), self.kernel, TCG, kvm_dev=self.kvm_dev, timeout=10)
        self.assertFalse(kvm)
        self.assertEqual(accel, ["-accel", TCG])
        self.assertIn("exited (1)", why)
        self.assertIn("failed to initialize kvm", why)

    def test_no_usable_kvm_device_means_tcg_without_a_probe(self):
        missing = os.path.join(self.dir.name, "no-kvm")
        accel, kvm, why = choose_accel(self.qemu(BOOTS), self.kernel, TCG, kvm_dev=missing)
        self.assertFalse(kvm)
        self.assertEqual(accel, ["-accel", TCG])
        self.assertIn("cannot be opened", why)
        self.assertFalse(os.path.exists(os.path.join(self.dir.name, "pid")), "qemu was started")

    def test_the_verdict_is_probed_once_per_host_boot(self):
        cache = os.path.join(self.dir.name, "cache")
        qemu = self.qemu(HANGS)
        _, kvm, _ = choose_accel(qemu, self.kernel, TCG, kvm_dev=self.kvm_dev, timeout=1, cache_dir=cache)
        self.assertFalse(kvm)
        os.remove(os.path.join(self.dir.name, "pid"))
        _, kvm, why = choose_accel(qemu, self.kernel, TCG, kvm_dev=self.kvm_dev, timeout=1, cache_dir=cache)
        self.assertFalse(kvm)
        self.assertIn("probed earlier in this boot", why)
        self.assertFalse(os.path.exists(os.path.join(self.dir.name, "pid")), "probed twice")

    def test_a_qemu_that_cannot_start_is_no_kvm(self):
        booted, why = kvm_boots(os.path.join(self.dir.name, "no-such-qemu"), self.kernel, timeout=1)
        self.assertFalse(booted)
        self.assertIn("did not start", why)


if __name__ == "__main__":
    unittest.main(verbosity=2)
