"""CPU tests of image_torch.py with the numpy stand-in backend (no torch, no GPU):

    python3 -m unittest discover -s scripts/reference -p 'test_image_torch.py'

Each test writes a fake dump (manifest.json + raw f32 files, the layout the Rust side writes)
into a temporary folder with fresh seeded inputs (seed printed on failure)."""
import io
import json
import math
import os
import tempfile
import time
import unittest

import numpy as np

import image_torch as it
import image_torch_numpy as nb

SEED = int(os.environ.get("BONSAI_TEST_SEED", time.time_ns() % 2**32))
U = 2.0**-24


def tensor(folder, case, name, data):
    file = f"{case}.{name}.f32"
    np.asarray(data, dtype="<f4").tofile(os.path.join(folder, file))
    return {"name": name, "shape": list(np.shape(data)), "file": file}


def make_case(folder, name, op, params, inputs, ours, speed=None, accuracy=None, seconds=1e-3, flops=0.0, nbytes=1e6):
    return {
        "name": name,
        "op": op,
        "params": params,
        "inputs": [tensor(folder, name, k, v) for k, v in inputs],
        "output": tensor(folder, name, "out", ours) if ours is not None else {"name": "out", "shape": [], "file": None},
        "ours_median_s": seconds,
        "copies": 2,
        "flops": flops,
        "bytes": nbytes,
        "speed_target": speed or {"kind": "report", "value": None},
        "accuracy_target": accuracy or {"kind": "rel_err_at_most", "value": 16 * U},
        "file_bytes": 0,
        "error": None,
    }


def write_manifest(folder, cases, copy_bw=4.0e12):
    manifest = {"format": 1, "seed": 1, "seed_str": "1", "device": "fake", "copy_bandwidth_bytes_per_s": copy_bw,
                "rotation_bytes": 1, "cases": cases}
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(manifest, f)


class ImageTorchTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(SEED)
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def rand(self, *shape, scale=2.0):
        return self.rng.uniform(-scale, scale, size=shape).astype(np.float32)

    def every_op(self):
        """One small case per op with ours = the float32 computation (exact ops: exact)."""
        x = self.rand(64, 5, 7)
        gamma, beta = self.rand(64, scale=1.5), self.rand(64, scale=0.5)
        a, w = self.rand(9, 33), self.rand(11, 33, scale=0.05)
        q, k, v = self.rand(2, 17, 8), self.rand(2, 17, 8), self.rand(2, 17, 8)
        cx, cw, cb = self.rand(3, 6, 5), self.rand(4, 3, 3, 3, scale=0.3), self.rand(4, scale=0.1)
        gn = {"groups": 32, "eps": 1e-6}
        specs = [
            ("group_norm", gn, [("x", x), ("gamma", gamma), ("beta", beta)]),
            ("group_norm_silu", gn, [("x", x), ("gamma", gamma), ("beta", beta)]),
            ("silu", {}, [("x", x)]),
            ("upsample_nearest2x", {}, [("x", x)]),
            ("im2col", {}, [("x", x)]),
            ("conv3x3", {}, [("x", cx), ("weight", cw), ("bias", cb)]),
            ("gemm_f32", {}, [("a", a), ("w", w)]),
            ("gemm_ternary", {}, [("a", a), ("w", w)]),
            ("joint_attention", {}, [("q", q), ("k", k), ("v", v)]),
        ]
        loose = {"kind": "rel_err_at_most", "value": 1e-5}
        cases = []
        for op, params, inputs in specs:
            ours = nb.compute(op, params, [t for _, t in inputs]).astype(np.float32)
            acc = {"kind": "rel_err_at_most", "value": 0.0} if op in ("upsample_nearest2x", "im2col") else loose
            cases.append(make_case(self.dir, f"{op}_small", op, params, inputs, ours, accuracy=acc))
        return cases

    def test_every_op_passes_when_ours_is_the_f32_result(self):
        cases = self.every_op()
        write_manifest(self.dir, cases)
        out = io.StringIO()
        rows = it.run(self.dir, nb.NumpyBackend(), out=out)
        self.assertEqual(len(rows), len(cases), out.getvalue())
        for r in rows:
            self.assertTrue(r["pass"], f"seed {SEED}: {r}\n{out.getvalue()}")
            if r["op"] in ("upsample_nearest2x", "im2col"):
                self.assertEqual(r["ours_err"], 0.0)
        self.assertIn("0 failed", out.getvalue())
        attention = next(r for r in rows if r["op"] == "joint_attention")
        self.assertGreater(attention["torch_bf16_err"], 100 * attention["ours_err"], f"seed {SEED}")

    def test_a_wrong_nan_or_missing_output_fails(self):
        cases = self.every_op()[:4]
        bad = nb.compute("silu", {}, [np.ones((2, 3, 4), np.float32)]).astype(np.float32)
        bad[1, 2, 3] += 1e-3
        cases.append(make_case(self.dir, "silu_wrong", "silu", {}, [("x", np.ones((2, 3, 4), np.float32))], bad))
        nan = bad.copy()
        nan[0, 0, 0] = np.nan
        cases.append(make_case(self.dir, "silu_nan", "silu", {}, [("x", np.ones((2, 3, 4), np.float32))], nan))
        errored = make_case(self.dir, "silu_error", "silu", {}, [("x", np.ones((2, 3, 4), np.float32))], None)
        errored["error"] = "silu: y holds 3 elements, needs 24"
        cases.append(errored)
        short = make_case(self.dir, "silu_short", "silu", {}, [("x", np.ones((2, 3, 4), np.float32))], bad)
        short["output"]["shape"] = [2, 3, 5]
        cases.append(short)
        write_manifest(self.dir, cases)
        out = io.StringIO()
        rows = {r["name"]: r for r in it.run(self.dir, nb.NumpyBackend(), out=out)}
        for name in ("silu_wrong", "silu_nan", "silu_error", "silu_short"):
            self.assertFalse(rows[name]["pass"], f"{name} passed:\n{out.getvalue()}")
        self.assertEqual(rows["silu_nan"]["ours_err"], math.inf)
        self.assertIn("y holds 3 elements", rows["silu_error"]["error"])
        self.assertIn("needs 30", rows["silu_short"]["error"])
        self.assertIn("4 failed", out.getvalue())

    def test_speed_targets(self):
        v = it.speed_verdict
        self.assertAlmostEqual(v({"kind": "fraction_of_copy", "value": 0.7}, 1e-3, None, None, 0, 3e9, 4e12)[0], 0.75)
        self.assertAlmostEqual(v({"kind": "vs_torch_f32", "value": 1.5}, 1.0, 2.0, None, 0, 0, 1)[0], 2.0)
        self.assertAlmostEqual(v({"kind": "vs_torch_bf16", "value": 0.5}, 2.0, None, 0.5, 0, 0, 1)[0], 0.25)
        self.assertAlmostEqual(v({"kind": "tflops_at_least", "value": 250}, 1e-3, None, None, 3e11, 0, 1)[0], 300)
        self.assertEqual(v({"kind": "report", "value": None}, 1.0, None, None, 0, 0, 1)[1], None)
        with self.assertRaises(ValueError):
            v({"kind": "bogus", "value": 1}, 1.0, 1.0, 1.0, 0, 0, 1)

    def test_a_slow_kernel_fails_its_speed_target(self):
        x = self.rand(32, 4, 4)
        ours = nb.silu(x).astype(np.float32)
        fast = make_case(self.dir, "silu_fast", "silu", {}, [("x", x)], ours, nbytes=3e9, seconds=1e-3,
                         speed={"kind": "fraction_of_copy", "value": 0.7}, accuracy={"kind": "rel_err_at_most", "value": 1e-5})
        slow = dict(fast, name="silu_slow", ours_median_s=2e-3)
        write_manifest(self.dir, [fast, slow], copy_bw=4e12)
        rows = {r["name"]: r for r in it.run(self.dir, nb.NumpyBackend(), out=io.StringIO())}
        self.assertTrue(rows["silu_fast"]["pass"], rows["silu_fast"])
        self.assertFalse(rows["silu_slow"]["pass"], rows["silu_slow"])

    def test_accuracy_relative_to_torch(self):
        limit, _ = it.accuracy_verdict({"kind": "vs_torch_f32", "value": 2.0}, 3e-7, 2e-7, None)
        self.assertAlmostEqual(limit, 4e-7)
        limit, _ = it.accuracy_verdict({"kind": "vs_torch_bf16", "value": 2.0}, 1e-3, 1e-7, 3e-3)
        self.assertAlmostEqual(limit, 6e-3)

    def test_helpers(self):
        self.assertEqual(it.rel_frobenius([3.0, 4.0], [3.0, 4.0]), 0.0)
        self.assertAlmostEqual(it.rel_frobenius([3.0, 5.0], [3.0, 4.0]), 0.2)
        self.assertEqual(it.rel_frobenius([np.inf], [1.0]), math.inf)
        self.assertEqual(it.rel_frobenius([0.0], [0.0]), 0.0)
        self.assertEqual(it.rel_frobenius([1.0, 2.0], [1.0, 2.0, 3.0]), math.inf)
        # bf16 keeps 8 significant bits, ties to even.
        self.assertEqual(float(nb.round_to_bf16(np.float32(1.0 + 2**-8))[()]), 1.0)
        self.assertEqual(float(nb.round_to_bf16(np.float32(1.0 + 3 * 2**-9))[()]), 1.0 + 2**-7)
        # im2col against the definition, one element at a time.
        x = self.rand(2, 3, 4)
        cols = nb.im2col(x)
        for row in range(18):
            c, ky, kx = row // 9, row % 9 // 3, row % 3
            for p in range(12):
                y, xx = p // 4 + ky - 1, p % 4 + kx - 1
                want = x[c, y, xx] if 0 <= y < 3 and 0 <= xx < 4 else 0.0
                self.assertEqual(cols[row, p], want, f"row {row} pixel {p}")
        self.assertEqual(nb.upsample_nearest2x(x)[1, 5, 7], x[1, 2, 3])

    def test_manifest_format_is_checked(self):
        write_manifest(self.dir, [])
        with open(os.path.join(self.dir, "manifest.json")) as f:
            m = json.load(f)
        m["format"] = 99
        with open(os.path.join(self.dir, "manifest.json"), "w") as f:
            json.dump(m, f)
        with self.assertRaises(ValueError):
            it.load_manifest(self.dir)


if __name__ == "__main__":
    unittest.main()
