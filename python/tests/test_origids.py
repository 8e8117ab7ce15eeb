"""OrigIds: relabelled id -> original id through orig_ids.bin."""

import os
import shutil
import subprocess
import sys
import tempfile
import tracemalloc
import unittest

import numpy as np
import torch

import graphnode


class OrigIdsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="graphnode-ids-")
        self.orig = np.array([70, 10, 2 ** 40, 5, 0, 33], dtype="<u8")
        self.orig.tofile(os.path.join(self.dir, "orig_ids.bin"))
        with open(os.path.join(self.dir, "graph.toml"), "w") as f:
            f.write('version = 1\nname = "t"\nnodes = 6\n')

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_lookups(self):
        ids = graphnode.OrigIds(self.dir)
        self.assertEqual(len(ids), 6)
        self.assertEqual(ids[2], 2 ** 40)
        t = ids[torch.tensor([[5, 0], [2, 2]])]
        self.assertEqual(t.dtype, torch.int64)
        self.assertEqual(t.tolist(), [[33, 70], [2 ** 40, 2 ** 40]])
        a = ids[np.array([1, 3], dtype=np.int64)]
        self.assertEqual((a.dtype, a.tolist()), (np.dtype("<u8"), [10, 5]))
        self.assertEqual(ids[[]].tolist(), [])
        for bad in (6, -1, torch.tensor([0, 9])):
            with self.assertRaisesRegex(IndexError, "outside \\[0, 6\\)"):
                ids[bad]
        with self.assertRaisesRegex(TypeError, "integers"):
            ids[np.array([0.5])]

    def test_closed(self):
        """A lookup after close says it is closed: an id said "outside
        [0, 0)", and no ids an I/O error of the closed file."""
        ids = graphnode.OrigIds(self.dir)
        ids.close()
        for look in (lambda: ids[2], lambda: ids[[]], lambda: ids[torch.tensor([1])], lambda: ids.names([1])):
            with self.assertRaisesRegex(ValueError, "origids: .*orig_ids.bin: closed"):
                look()

    def test_ids_past_int64(self):
        # Hashed input ids use all 64 bits; torch has no uint64, so a
        # torch lookup refuses an id it would wrap negative, naming it,
        # while numpy lookups return it whole.
        big = np.array([2 ** 63, 2 ** 64 - 1, 7], dtype="<u8")
        big.tofile(os.path.join(self.dir, "orig_ids.bin"))
        with open(os.path.join(self.dir, "graph.toml"), "w") as f:
            f.write('version = 1\nname = "t"\nnodes = 3\n')
        ids = graphnode.OrigIds(self.dir)
        self.assertEqual(ids[0], 2 ** 63)
        self.assertEqual(ids[np.array([1, 2])].tolist(), [2 ** 64 - 1, 7])
        self.assertEqual(ids[torch.tensor([2])].tolist(), [7])
        with self.assertRaisesRegex(OverflowError, "original id 9223372036854775808 of id 0 .*numpy"):
            ids[torch.tensor([2, 0])]

    def test_names(self):
        with open(os.path.join(self.dir, "names.txt"), "w") as f:
            f.write("\n".join("n%d" % i for i in range(71)) + "\n")
        ids = graphnode.OrigIds(self.dir)
        self.assertEqual(ids.names(torch.tensor([0, 3])), ["n70", "n5"])
        self.assertEqual(ids.names(1), "n10")

    def test_names_are_bytes_per_line(self):
        # names.txt holds the input's bytes, one name per "\n": a "\r" in
        # a name stays in it (newline translation split it in two and
        # shifted every later name), bytes that are not UTF-8 (a Latin-1
        # input) come back as surrogate escapes instead of failing every
        # lookup, and an index past the last line is an IndexError naming
        # the file.
        with open(os.path.join(self.dir, "names.txt"), "wb") as f:
            f.write(b"".join(b"n%d\n" % i for i in range(5)) + b"caf\xe9\n" + b"".join(b"n%d\n" % i for i in range(6, 10))
                    + b"a\rb\n" + b"".join(b"n%d\n" % i for i in range(11, 70)))
        ids = graphnode.OrigIds(self.dir)
        # orig_ids: 70, 10, 2**40, 5, 0, 33
        self.assertEqual(ids.names([3, 1, 5]), ["caf\udce9", "a\rb", "n33"])
        self.assertEqual(ids.names(3).encode("utf-8", "surrogateescape"), b"caf\xe9")
        with self.assertRaisesRegex(IndexError, "names.txt: 70 lines, no name for original index 70"):
            ids.names(0)
        with self.assertRaisesRegex(IndexError, "no name for original index 1099511627776"):
            ids.names([1, 2])

    def test_names_not_loaded_whole(self):
        # names() of a few ids must not turn every line of names.txt into
        # a Python string (about 70 bytes per name: 7 GB and a minute for
        # 100 M string ids, in every trainer): it keeps the file mapped
        # and an index of 8 bytes per name.
        n = 100000
        orig = np.arange(n, dtype="<u8")[::-1]
        orig.tofile(os.path.join(self.dir, "orig_ids.bin"))
        with open(os.path.join(self.dir, "graph.toml"), "w") as f:
            f.write('version = 1\nname = "t"\nnodes = %d\n' % n)
        with open(os.path.join(self.dir, "names.txt"), "w") as f:
            f.write("".join("/m/%06d\n" % i for i in range(n)))
        ids = graphnode.OrigIds(self.dir)
        tracemalloc.start()
        try:
            got = ids.names([0, 7, n - 1])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        self.assertEqual(got, ["/m/%06d" % (n - 1), "/m/%06d" % (n - 8), "/m/000000"])
        self.assertLess(peak, 24 * n)

    def test_names_file_edges(self):
        # The last line without "\n", empty names, an empty file.
        for data, want in ((b"a\nb\n\nd\ne\nf", ["", "b", "f", "d", "a", "e"]),
                           (b"a\nb\n\nd\ne\nf\n", ["", "b", "f", "d", "a", "e"])):
            with open(os.path.join(self.dir, "names.txt"), "wb") as f:
                f.write(data)
            self.orig = np.array([2, 1, 5, 3, 0, 4], dtype="<u8")
            self.orig.tofile(os.path.join(self.dir, "orig_ids.bin"))
            ids = graphnode.OrigIds(self.dir)
            self.assertEqual(ids.names(range(6)), want)
        open(os.path.join(self.dir, "names.txt"), "wb").close()
        with self.assertRaisesRegex(IndexError, "names.txt: 0 lines, no name for original index 2"):
            graphnode.OrigIds(self.dir).names(0)

    def test_mismatch(self):
        with open(os.path.join(self.dir, "graph.toml"), "w") as f:
            f.write("version = 1\nnodes = 7\n")
        with self.assertRaisesRegex(ValueError, "6 ids, graph.toml says nodes = 7"):
            graphnode.OrigIds(self.dir)
        with open(os.path.join(self.dir, "orig_ids.bin"), "ab") as f:
            f.write(b"\0")
        with self.assertRaisesRegex(ValueError, "not a whole number"):
            graphnode.OrigIds(self.dir)
        with self.assertRaisesRegex(FileNotFoundError, "origids: .*/none/orig_ids.bin"):
            graphnode.OrigIds(os.path.join(self.dir, "none"))

    def test_truncated_under_lookups(self):
        # cp, scp or truncate on orig_ids.bin (or names.txt) while a
        # trainer holds an OrigIds: a lookup of a page past the new end
        # ended the trainer with SIGBUS ("Bus error", exit 135), naming
        # nothing. It is an error naming the file now. In a child process,
        # so that a fault fails this test rather than ending the run.
        with open(os.path.join(self.dir, "names.txt"), "w") as f:
            f.write("\n".join("n%d" % i for i in range(71)) + "\n")
        code = """if True:
            import os, sys
            import numpy as np
            import graphnode
            d = sys.argv[1]
            ids = graphnode.OrigIds(d)
            assert ids[np.array([5])].tolist() == [33]
            assert ids.names([1]) == ["n10"]
            for name, look in (("orig_ids.bin", lambda: ids[np.array([5])]), ("orig_ids.bin", lambda: ids[5]),
                               ("names.txt", lambda: ids.names([1]))):
                if name == "names.txt":
                    np.array([70, 10, 2 ** 40, 5, 0, 33], dtype="<u8").tofile(os.path.join(d, "orig_ids.bin"))
                    ids = graphnode.OrigIds(d)
                    ids.names([0])
                os.truncate(os.path.join(d, name), 0)
                try:
                    look()
                except OSError as e:
                    print(e)
                else:
                    print("no error")
        """
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (os.path.dirname(os.path.dirname(graphnode.__file__)),
                                                                         os.environ.get("PYTHONPATH", "")) if p))
        r = subprocess.run([sys.executable, "-c", code, self.dir], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, "child: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 3, r.stdout)
        for line, (name, size) in zip(lines, (("orig_ids.bin", 48), ("orig_ids.bin", 48), ("names.txt", 274))):
            self.assertRegex(line, "origids: .*/%s: the file is now 0 bytes, %d when opened: it was truncated or rewritten in place"
                             % (name.replace(".", "\\."), size))


if __name__ == "__main__":
    unittest.main()
