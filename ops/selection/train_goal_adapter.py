"""Train the goal adapter: low-rank (LoRA) updates of all-MiniLM-L6-v2's dense weights with which goals, and
with ``--skill-out`` skills, are read.

Each training goal is pulled towards its skill's vector and away from every other skill of its library (a softmax
over the whole library, so every near-miss is a negative). Without ``--skill-out`` skills keep the published
model's vectors (the 48-token name-and-description recipe of the index) and only goals move. With it, a second
update reads skills and is trained in the same steps: the library's vectors are re-encoded with it every
``--refresh`` batches (no gradient) for the whole-library softmax of the goals, and each batch adds a second softmax
over freshly encoded skills only — the batch's own skills, each goal's nearest ``--hard`` others and ``--random``
more — through which both updates learn. (A softmax whose negatives are stale while the right skill is fresh
teaches the skill update to move every fresh vector towards goals; measured, it collapsed.) The forward pass
mirrors orchestrator/select/encoder.py (tanh GELU, mean pooling) so that the merged weights behave as trained.

Not a dependency of the project: this script needs PyTorch (CPU build) in the environment that runs it.

    python ops/selection/train_goal_adapter.py --goals ops/selection/goal-adapter-goals.jsonl \\
        --library C=DIR --library D=DIR --library T=DIR --out orchestrator/select/data/goal-adapter-minilm-l6-r8.npz

``--goals`` lines are ``{"library": NAME, "skill": ID, "goal": TEXT}``; a line whose skill is not in its library is
skipped (and counted). ``--validate`` keeps one skill in six (by hash) out of training and prints recall@10 of their
goals after each epoch. The libraries are built from public collections by ops/selection/build_libraries.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from orchestrator.select.encoder import LOW_RANK_TARGETS
from orchestrator.select.gloss import english_reading
from orchestrator.select.index import SkillIndex, skill_docs
from orchestrator.select.semantic import (
    EMBED_MAX_TOKENS,
    MINILM,
    QUERY_MAX_TOKENS,
    embed_text,
    load_embedder,
    token_rows,
)
from orchestrator.skills.loader import SkillLibrary
from orchestrator.workflow.planner_bench import model_invocable

# The encoder's names for the dense weights, and the published model's.
TORCH_NAMES = dict(
    zip(
        LOW_RANK_TARGETS,
        (
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
            "intermediate.dense",
            "output.dense",
        ),
        strict=True,
    )
)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--goals", type=Path, required=True)
    parser.add_argument("--library", action="append", required=True, help="NAME=DIR, repeatable")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--tau", type=float, default=0.05)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--validate", action="store_true")
    parser.add_argument("--skill-out", type=Path, help="also train an update that reads skills, written here")
    parser.add_argument("--skill-lr", type=float, default=2e-4)
    parser.add_argument("--refresh", type=int, default=60, help="batches between re-encodings of the libraries")
    parser.add_argument("--hard", type=int, default=3)
    parser.add_argument("--random", type=int, default=16)
    return parser.parse_args()


class LowRankMiniLM:
    """The published model's forward pass in torch with a trainable B @ A beside every dense weight."""

    def __init__(self, model_dir: Path, rank: int) -> None:
        from safetensors.numpy import load_file

        config = json.loads((model_dir / "config.json").read_text())
        self.weights = {k: torch.tensor(v) for k, v in load_file(str(model_dir / "model.safetensors")).items()}
        self.hidden, self.heads = int(config["hidden_size"]), int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.low_rank: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        for i in range(self.layers):
            for target, torch_name in TORCH_NAMES.items():
                out_size, in_size = self.weights[f"encoder.layer.{i}.{torch_name}.weight"].shape
                a = (torch.randn(rank, in_size) / math.sqrt(in_size)).requires_grad_()
                b = torch.zeros(out_size, rank, requires_grad=True)  # starts as the published model
                self.low_rank[f"{i}.{target}"] = (a, b)

    def parameters(self) -> list[torch.Tensor]:
        return [p for pair in self.low_rank.values() for p in pair]

    def _dense(self, x: torch.Tensor, layer: int, target: str) -> torch.Tensor:
        prefix = f"encoder.layer.{layer}.{TORCH_NAMES[target]}"
        a, b = self.low_rank[f"{layer}.{target}"]
        return x @ self.weights[f"{prefix}.weight"].T + self.weights[f"{prefix}.bias"] + (x @ a.T) @ b.T

    def _norm(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        w = self.weights
        return torch.nn.functional.layer_norm(x, (self.hidden,), w[f"{prefix}.weight"], w[f"{prefix}.bias"], 1e-12)

    def encode(self, rows: list[list[int]]) -> torch.Tensor:
        width = max(len(r) for r in rows)
        ids = torch.zeros(len(rows), width, dtype=torch.long)
        mask = torch.zeros(len(rows), width)
        for j, row in enumerate(rows):
            ids[j, : len(row)] = torch.tensor(row)
            mask[j, : len(row)] = 1
        w = self.weights
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:width][None]
        x = self._norm(x + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
        bias = (1 - mask)[:, None, None, :] * -1e9
        size = self.hidden // self.heads
        for i in range(self.layers):
            q, k, v = (
                self._dense(x, i, t).view(len(rows), width, self.heads, size).transpose(1, 2)
                for t in ("query", "key", "value")
            )
            attention = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(size) + bias, -1)
            context = (attention @ v).transpose(1, 2).reshape(len(rows), width, self.hidden)
            attention_norm = f"encoder.layer.{i}.attention.output.LayerNorm"
            x = self._norm(x + self._dense(context, i, "attention_out"), attention_norm)
            inner = self._dense(x, i, "intermediate")
            inner = 0.5 * inner * (1 + torch.tanh(math.sqrt(2 / math.pi) * (inner + 0.044715 * inner**3)))
            x = self._norm(x + self._dense(inner, i, "output"), f"encoder.layer.{i}.output.LayerNorm")
        pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return pooled / pooled.norm(dim=1, keepdim=True)

    def export(self, path: Path) -> None:
        arrays = {}
        for name, (a, b) in self.low_rank.items():
            arrays[f"{name}.A"] = a.detach().numpy().astype(np.float16)
            arrays[f"{name}.B"] = b.detach().numpy().astype(np.float16)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **arrays)


def main() -> int:
    args = arguments()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    embedder = load_embedder(MINILM, goal_adapter=None)
    model_dir = MINILM.directory()
    if embedder is None or model_dir is None:
        sys.exit("the bundled model is not installed (ops/setup.sh installs it)")
    tokenizer = embedder._load().tokenizer

    skills: dict[str, torch.Tensor] = {}
    skill_texts: dict[str, list[list[int]]] = {}
    position: dict[str, dict[str, int]] = {}
    for spec in args.library:
        name, _, folder = spec.partition("=")
        library = SkillLibrary(Path(folder))
        index = SkillIndex.build(skill_docs(library, model_invocable(library.l1_index())), embedder=embedder)
        assert index.vectors is not None
        skills[name] = torch.tensor(index.vectors)
        skill_texts[name] = [cut(tokenizer, embed_text(d.name, d.description), EMBED_MAX_TOKENS) for d in index.docs]
        position[name] = {doc.id: k for k, doc in enumerate(index.docs)}
    rows, skipped = [], 0
    for line in args.goals.read_text(encoding="utf-8").splitlines():
        goal = json.loads(line)
        where = position.get(goal["library"], {})
        if goal["skill"] not in where:
            skipped += 1
            continue
        held = int(hashlib.sha256(f"{goal['skill']}/val".encode()).hexdigest(), 16) % 6 == 0
        goal_ids = cut(tokenizer, english_reading(goal["goal"]), QUERY_MAX_TOKENS)
        rows.append((goal["library"], where[goal["skill"]], goal_ids, held and args.validate))
    train = [r for r in rows if not r[3]]
    check = [r for r in rows if r[3]]
    print(f"{len(train)} goals to train on, {len(check)} to validate, {skipped} skipped", flush=True)
    model = LowRankMiniLM(model_dir, args.rank)
    skill_model = LowRankMiniLM(model_dir, args.rank) if args.skill_out else None
    groups = [{"params": model.parameters(), "lr": args.lr}]
    if skill_model is not None:
        groups.append({"params": skill_model.parameters(), "lr": args.skill_lr})
    optimiser = torch.optim.AdamW(groups, weight_decay=0.01)
    rng = np.random.default_rng(args.seed)

    def refresh() -> None:
        if skill_model is not None:
            for name, texts in skill_texts.items():
                skills[name] = encode_all(skill_model, texts)

    def recall_at_10() -> float:
        found = []
        with torch.no_grad():
            for name in skills:
                mine = [r for r in check if r[0] == name]
                for start in range(0, len(mine), 64):
                    batch = mine[start : start + 64]
                    sims = model.encode([r[2] for r in batch]) @ skills[name].T
                    target = torch.tensor([r[1] for r in batch])
                    found += ((sims > sims.gather(1, target[:, None])).sum(1) < 10).tolist()
        return float(np.mean(found)) if found else float("nan")

    if check:
        print(f"before: validation recall@10 {recall_at_10():.3f}", flush=True)
    for epoch in range(args.epochs):
        started, total = time.process_time(), 0.0
        order = rng.permutation(len(train))
        for step, start in enumerate(range(0, len(order), args.batch)):
            if step and step % args.refresh == 0:
                refresh()
            batch = [train[k] for k in order[start : start + args.batch]]
            loss = torch.zeros(())
            for name in skills:
                mine = [r for r in batch if r[0] == name]
                if not mine:
                    continue
                goals = model.encode([r[2] for r in mine])
                target = torch.tensor([r[1] for r in mine])
                whole = goals @ skills[name].T / args.tau
                loss = loss + torch.nn.functional.cross_entropy(whole, target, reduction="sum")
                if skill_model is not None:
                    nearest = (goals.detach() @ skills[name].T).topk(args.hard + 1, dim=1).indices.flatten().tolist()
                    extra = rng.choice(len(skill_texts[name]), size=args.random, replace=False).tolist()
                    columns = sorted({r[1] for r in mine} | set(nearest) | set(extra))
                    fresh = skill_model.encode([skill_texts[name][c] for c in columns])
                    local = torch.tensor([columns.index(r[1]) for r in mine])
                    loss = loss + torch.nn.functional.cross_entropy(goals @ fresh.T / args.tau, local, reduction="sum")
            loss = loss / len(batch)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += loss.item() * len(batch)
        refresh()
        note = f", validation recall@10 {recall_at_10():.3f}" if check else ""
        cpu = time.process_time() - started
        print(f"epoch {epoch + 1}: loss {total / len(train):.3f}, {cpu:.0f} s CPU{note}", flush=True)
    for out, trained in ((args.out, model), (args.skill_out, skill_model)):
        if out is not None and trained is not None:
            trained.export(out)
            print(f"wrote {out} (sha256 {hashlib.sha256(out.read_bytes()).hexdigest()})")
    return 0


def cut(tokenizer: Any, text: str, limit: int) -> list[int]:
    """Token ids of ``text`` as the index reads it (:func:`~orchestrator.select.semantic.token_rows`)."""
    return token_rows(tokenizer, [text], limit)[0]


def encode_all(model: LowRankMiniLM, texts: list[list[int]]) -> torch.Tensor:
    """Every text's vector, without gradients, in batches of similar length."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = torch.zeros(len(texts), model.hidden)
    with torch.no_grad():
        for start in range(0, len(order), 128):
            rows = order[start : start + 128]
            out[rows] = model.encode([texts[i] for i in rows])
    return out


if __name__ == "__main__":
    raise SystemExit(main())
