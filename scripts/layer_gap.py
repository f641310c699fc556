"""Where a case's kv-mode program leaves its deployed QDQ graph, layer by layer, on a prompt.

    python scripts/layer_gap.py --models smollm2_135m --variant upstream-ci \\
        --prompt "What is the capital of France?" [--within layers.11 ...] \\
        [--calls N] [--cache DIR] [--soc SM8650]

Builds (or finds in the artifact cache) the case variant's QDQ graphs and program, compiles its
decode graph once more with QNN's tensor dump on (``stages/compile_dumping.py``), and feeds the
prompt's ids as llama.py's evaluator does (its chat template: the harness's calibration ids)
through the program one token per call; at every call the dumping program runs on the same
inputs, its logits are held to the program's (the dump must be the shipped computation), and
each RMSNorm output and the logits are compared with the decode QDQ graph's on those inputs
(``checks/layer_gap.py``). Prints one row per RMSNorm: its median / lowest SQNR over the calls,
and the steepest fall of the medians. ``--within MODULE`` (repeatable): one row more per op of
the module and the modules under it, in graph order (``compare_ops``: each op's output against
the dumped tensor of the same module and op); ``--calls N``: the prompt's first N calls only.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_qnn_genai.settings import artifacts_dir, default_cache_dir  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True)
    parser.add_argument("--variant", default="new")
    parser.add_argument("--prompt", action="append", required=True)
    parser.add_argument("--soc", default="SM8650")
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--within", action="append", default=[],
                        help="a module path: its ops' rows too (repeatable)")
    parser.add_argument("--calls", type=int, help="the first N calls of each prompt only")
    args = parser.parse_args()
    import executorch.runtime  # noqa: F401 - before the SDK's libraries (host_runner's hazard)
    import torch

    from pytest_qnn_genai.cache import ArtifactCache
    from pytest_qnn_genai.checks.layer_gap import compare_call, compare_ops, steepest_fall
    from pytest_qnn_genai.hybrid import DECODE
    from pytest_qnn_genai.models.registry import select
    from pytest_qnn_genai.pipeline import Pipeline
    from pytest_qnn_genai.runtime.host_runner import HybridRunner
    from pytest_qnn_genai.runtime.intermediates import dump_call
    from pytest_qnn_genai.sdk import activate, resolve_sdk
    from pytest_qnn_genai.sdk.versions import stack
    from pytest_qnn_genai.stages import gguf_import
    from pytest_qnn_genai.stages.compile_dumping import DUMPING_NODES, compile_dumping
    from pytest_qnn_genai.targets import Target, soc

    cache_dir = args.cache or default_cache_dir(dict(os.environ))
    sdk = resolve_sdk(None, cache_dir)
    if sdk is None:
        raise SystemExit("layer_gap: no QNN SDK (install onnxruntime-qnn or set QNN_SDK_ROOT)")
    activate(sdk)
    (case,) = select([args.models])
    case = case.variant(args.variant)
    target = Target(soc(args.soc))
    cache = ArtifactCache(artifacts_dir(cache_dir), stack(sdk))
    gguf_import.install(lambda: cache)  # a case naming a GGUF imports it through the cache
    pipeline = Pipeline(cache)
    qdq = pipeline.qdq(case, target)
    shipped = pipeline.pte(case, target).pte
    graph = qdq.graph(DECODE)
    with tempfile.TemporaryDirectory(prefix="layer-gap-") as tmp:
        dumping = compile_dumping(qdq, target, Path(tmp))
        nodes = json.loads((Path(tmp) / DUMPING_NODES).read_text())
        for prompt in args.prompt:
            ids = pipeline.prepared(case).calibration_ids(prompt)[:args.calls]
            calls, ops = [], []
            runner = HybridRunner(shipped)
            for n_past, (inputs, outputs) in enumerate(runner.decode_calls(ids)):
                dumped_outputs, dumped = dump_call(dumping, DECODE, inputs)
                if not torch.equal(dumped_outputs[0], outputs[0]):
                    raise SystemExit(f"call {n_past}: the dumping program's logits are not the "
                                     "program's: its dump says nothing about the program")
                logits = ((outputs[0].to(torch.float32) - runner.logits_zero_point)
                          * runner.logits_scale).numpy()
                calls.append(compare_call(graph, inputs, dumped, logits))
                if args.within:
                    ops.append([row for within in args.within
                                for row in compare_ops(graph, inputs, dumped, nodes, within)])
                print(f"call {n_past}: " + " ".join(f"{r.sqnr_db:.1f}" for r in calls[-1]),
                      flush=True)
            print(f"\n{case.name} on {prompt!r} ({len(ids)} calls, {shipped.name}):")
            print("| # | node | where | median SQNR dB | lowest | median cosine |")
            print("|---|---|---|---|---|---|")
            for k, rows in enumerate(zip(*calls)):
                sqnr = [r.sqnr_db for r in rows]
                print(f"| {k} | {rows[0].name} | {rows[0].where} | {statistics.median(sqnr):.2f} "
                      f"| {min(sqnr):.2f} | {statistics.median(r.cosine for r in rows):.4f} |")
            medians = [dataclasses.replace(rows[0], sqnr_db=statistics.median(
                r.sqnr_db for r in rows)) for rows in zip(*calls)]
            before, at = steepest_fall(medians[:-1])  # the RMSNorms; the logits are the head's
            print(f"steepest fall: {before.where} {before.sqnr_db:.2f} dB -> {at.where} "
                  f"{at.sqnr_db:.2f} dB")
            if ops:
                print(f"\nthe ops under {', '.join(args.within)}:")
                print("| module | op | node | dumped | median SQNR dB | lowest | median cosine |")
                print("|---|---|---|---|---|---|---|")
                for rows in zip(*ops):
                    sqnr = [r.sqnr_db for r in rows]
                    r = rows[0]
                    print(f"| {r.module} | {r.op} | {r.node} | {r.dumped} | "
                          f"{statistics.median(sqnr):.2f} | {min(sqnr):.2f} | "
                          f"{statistics.median(x.cosine for x in rows):.4f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
