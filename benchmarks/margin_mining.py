"""BUCC-style margin mining: tasks.evaluate.mining vs the approach of DAP's public evaluation code.

Synthetic data, seeded: X = random unit vectors; Y = noisy copies of a subset of X (the gold
pairs) plus random distractors, rows shuffled; float32, dim 384. Two splits (tune, test) of
n x n each: the threshold is fitted on tune and applied to test, as for BUCC.

Default mode (n = 100k):
  ours       tasks.evaluate.mining.bucc_mining: faiss IndexFlatIP (exact) + numpy margins,
             proposals and one-to-one matching, vectorised threshold search.
  reference  a re-creation of DAP's eval_bucc.py algorithm on CPU: k-NN by
             F.cosine_similarity over 128x128 broadcast blocks and topk; per-element Python
             scoring of the k candidates; a Python greedy loop over the argsorted scores;
             threshold search and test scoring with gold kept as a list of "id<TAB>id"
             strings. (Its dead O(n^2) duplicate-count loop is left out, and the read past
             the end of the candidate list is guarded: both would only make it slower or crash.)
  The reference k-NN takes hours at 100k on two cores, so it is extrapolated from measured
  parts: the cost of one 128x128 block (timed over --ref-knn-rows query rows against 4096
  target rows, after a warm-up) times the (n/128)^2 blocks, plus the concatenation and topk
  of a 128 x n row of blocks (timed at n) times n/128, for 2 directions x 2 splits. Timing the
  blocks against all n rows instead is not possible here: the reference keeps a list of n/128
  block results per query batch, and each F.cosine_similarity call frees a 25 MB temporary
  that glibc's heap then cannot reuse, so one batch against 100k rows grew to ~20 GB RSS and
  was OOM-killed (on GPU, torch's caching allocator reuses the buffer; serving it by mmap
  instead adds page faults that slowed it several-fold here and would flatter us). Every other
  reference phase is run in full at n, on our k-NN output. The whole reference pipeline (its
  own k-NN included) also runs end to end at --ref-n, to check that its F1 equals ours.

--scale (n = 1M): one split mined with an IVF index (IndexIVFFlat, spherical k-means; exact
  search is estimated from a timed query sample and is far over budget on two cores); prints
  time per phase, peak RSS, the k-NN recall@4 of IVF against exact search on a query sample,
  and F1 with the threshold fitted on that same split (optimistic: no held-out split at this
  size). On uniform random vectors (the default data) neighbours have no cluster structure,
  the worst case for IVF: recall is low. --topics draws x and the distractors around topic
  centres (a crude stand-in for the clustered geometry of real sentence embeddings), where
  the same index finds nearly all exact neighbours; use a smaller --noise there (e.g. 1.5).

    python benchmarks/margin_mining.py [--n 100000] [--ref-n 4000] [--ref-knn-rows 1024]
    python benchmarks/margin_mining.py --scale [--n 1000000] [--nlist 2048] [--nprobe 8] [--topics 2000 --noise 1.5]
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.evaluate import mining  # noqa: E402

K = mining.DEFAULT_K


def unit(a: np.ndarray) -> np.ndarray:
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    return a


def make_split(n: int, dim: int, gold_fraction: float, noise: float, seed: int, topics: int = 0, spread: float = 1.0):
    """(x, y, gold_src, gold_tgt): y holds noisy copies of gold_fraction * n rows of x plus distractors.

    topics=0: x and the distractors are uniform random unit vectors. topics>0: they are drawn
    around that many random unit "topic" centres (centre + spread * Gaussian of norm ~1), a
    crude model of the cluster structure of real sentence embeddings.
    """
    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((topics, dim), dtype=np.float32)) if topics else None
    x = rng.standard_normal((n, dim), dtype=np.float32)
    if centres is not None:
        x *= np.float32(spread / np.sqrt(dim))
        x += centres[rng.integers(topics, size=n)]
    unit(x)
    n_gold = int(n * gold_fraction)
    gold_src = np.sort(rng.choice(n, n_gold, replace=False))
    y = rng.standard_normal((n, dim), dtype=np.float32)
    y[:n_gold] = x[gold_src] + (noise / np.sqrt(dim)) * y[:n_gold]
    if centres is not None:
        distractors = y[n_gold:]
        distractors *= np.float32(spread / np.sqrt(dim))
        distractors += centres[rng.integers(topics, size=n - n_gold)]
    unit(y)
    order = rng.permutation(n)  # y row order[j] -> position j
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    y = np.ascontiguousarray(y[order])
    return x, y, gold_src.astype(np.int64), position[:n_gold]


# ------------------------------------------------------------------ reference (DAP eval_bucc.py algorithm)


def reference_knn(x, y, k, batch_size=128):
    import torch
    import torch.nn.functional as F

    sims, inds = [], []
    for i in range(0, len(x), batch_size):
        x_batch = x[i : i + batch_size]
        block = [
            F.cosine_similarity(x_batch.unsqueeze(1), y[j : j + batch_size].unsqueeze(0), dim=-1)
            for j in range(0, len(y), batch_size)
        ]
        top = torch.cat(block, dim=1).topk(k, dim=1)
        sims.append(top[0])
        inds.append(top[1])
    return torch.cat(sims, 0), torch.cat(inds, 0)


def reference_score_candidates(x, y, candidates, fwd_mean, bwd_mean):
    import torch
    import torch.nn.functional as F

    scores = torch.zeros(candidates.shape)
    for i in range(scores.shape[0]):
        for j in range(scores.shape[1]):
            c = candidates[i, j]
            scores[i, j] = F.cosine_similarity(x[i], y[c], dim=0) / ((fwd_mean[i] + bwd_mean[c]) / 2)
    return scores


def reference_mine(x, y, x_ids, y_ids, knn_xy, knn_yx, threshold, timings):
    """DAP's mine_bitext after the k-NN: per-element scoring, then a greedy loop over sorted scores."""
    import torch

    (x2y_sim, x2y_ind), (y2x_sim, y2x_ind) = knn_xy, knn_yx
    x2y_mean, y2x_mean = x2y_sim.mean(dim=1), y2x_sim.mean(dim=1)
    start = time.perf_counter()
    fwd = reference_score_candidates(x, y, x2y_ind, x2y_mean, y2x_mean)
    bwd = reference_score_candidates(y, x, y2x_ind, y2x_mean, x2y_mean)
    timings["score"] = timings.get("score", 0) + time.perf_counter() - start
    start = time.perf_counter()
    fwd_best = x2y_ind[torch.arange(x.shape[0]), fwd.argmax(dim=1)]
    bwd_best = y2x_ind[torch.arange(y.shape[0]), bwd.argmax(dim=1)]
    indices = torch.stack(
        (torch.cat((torch.arange(x.shape[0]), bwd_best)), torch.cat((fwd_best, torch.arange(y.shape[0])))), dim=1
    ).tolist()
    scores = torch.cat((fwd.max(dim=1)[0], bwd.max(dim=1)[0]))
    seen_src, seen_tgt, mined = set(), set(), []
    for i in scores.argsort(dim=0, descending=True):
        src, tgt = indices[i]
        if src not in seen_src and tgt not in seen_tgt:
            seen_src.add(src)
            seen_tgt.add(tgt)
            if scores[i] > threshold:
                mined.append(((x_ids[src], y_ids[tgt]), scores[i]))
    timings["match"] = timings.get("match", 0) + time.perf_counter() - start
    return mined


def reference_optimize(mined, gold):
    n_gold = len(gold)
    n_extract = n_correct = 0
    threshold = best_f1 = 0
    for i in range(len(mined)):
        n_extract += 1
        if "\t".join(mined[i][0]) in gold:  # list membership, as in the reference
            n_correct += 1
        if n_correct > 0:
            precision, recall = n_correct / n_extract, n_correct / n_gold
            f1 = 2 * precision * recall / (precision + recall)
            if f1 > best_f1:
                best_f1 = f1
                nxt = mined[i + 1][1] if i + 1 < len(mined) else mined[i][1] - 1e-6  # guard: the reference reads past the end
                threshold = (mined[i][1] + nxt) / 2
    return threshold, best_f1


def reference_test_f1(mined, gold):
    n_correct = sum(1 for pair, _ in mined if "\t".join(pair) in gold)
    precision, recall = n_correct / len(mined), n_correct / len(gold)
    return 2 * precision * recall / (precision + recall)


def reference_pipeline(tune, test, knns, timings):
    """The reference after its k-NN; ``knns`` = [(knn_xy, knn_yx) for tune, test] as torch tensors."""
    import torch

    results = []
    for split, (knn_xy, knn_yx), threshold in ((tune, knns[0], 0.0), (test, knns[1], None)):
        x, y, gold_src, gold_tgt = split
        x_ids = [f"xx-{i:07d}" for i in range(len(x))]
        y_ids = [f"en-{i:07d}" for i in range(len(y))]
        gold = [f"{x_ids[a]}\t{y_ids[b]}" for a, b in zip(gold_src, gold_tgt)]
        mined = reference_mine(torch.from_numpy(x), torch.from_numpy(y), x_ids, y_ids, knn_xy, knn_yx,
                               results[0][0] if threshold is None else threshold, timings)  # fmt: skip
        start = time.perf_counter()
        if threshold is not None:
            results.append(reference_optimize(mined, gold))
        else:
            results.append((None, reference_test_f1(mined, gold)))
        timings["gold"] = timings.get("gold", 0) + time.perf_counter() - start
    return results[0][1], results[1][1]  # tune F1, test F1


def reference_knn_pair(x, y, k):
    import torch

    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    return reference_knn(tx, ty, k), reference_knn(ty, tx, k)


# ------------------------------------------------------------------ modes


def same_f1(a, b) -> bool:
    """F1 pairs equal up to float rounding (the reference computes 2PR/(P+R), ours 2TP/(selected+gold))."""
    return all(math.isclose(u, v, rel_tol=1e-12, abs_tol=1e-15) for u, v in zip(a, b))


def compare(args) -> None:
    import torch

    print(f"threads: torch {torch.get_num_threads()}, faiss {__import__('faiss').omp_get_max_threads()}, cpus {os.cpu_count()}")
    print(
        f"data: 2 splits (tune, test) of {args.n:,} x {args.n:,}, dim {args.dim}, gold {args.gold_fraction:.0%}, noise {args.noise}"
    )
    tune = make_split(args.n, args.dim, args.gold_fraction, args.noise, args.seed)
    test = make_split(args.n, args.dim, args.gold_fraction, args.noise, args.seed + 1)

    captured = []  # our k-NN results, reused as the input of the reference's later phases
    exact_knn = mining.knn

    def recording_knn(*a, **kw):
        captured.append(exact_knn(*a, **kw))
        return captured[-1]

    mining.knn = recording_knn
    try:
        start = time.perf_counter()
        ours = mining.bucc_mining(tune, test)
        ours_s = time.perf_counter() - start
    finally:
        mining.knn = exact_knn
    print(f"\nours      {ours_s:8.1f} s   tune F1 {ours.tune.f1:.6f}  test F1 {ours.test.f1:.6f}  "
          f"(P {ours.test.precision:.4f} R {ours.test.recall:.4f}, threshold {ours.test.threshold:.6f})")  # fmt: skip

    # reference k-NN, extrapolated from its measured parts (see the module docstring)
    rows = min(args.ref_knn_rows, args.n)
    cols = min(4096, args.n)
    tx, ty = torch.from_numpy(tune[0][:rows]), torch.from_numpy(tune[1][:cols])
    reference_knn(tx[:128], ty, K)  # warm-up
    start = time.perf_counter()
    reference_knn(tx, ty, K)
    block_s = (time.perf_counter() - start) / (math.ceil(rows / 128) * math.ceil(cols / 128))
    row_of_blocks = [torch.rand(128, 128) for _ in range(math.ceil(args.n / 128))]
    start = time.perf_counter()
    for _ in range(5):
        torch.cat(row_of_blocks, dim=1).topk(K, dim=1)
    gather_s = (time.perf_counter() - start) / 5
    batches = math.ceil(args.n / 128)
    knn_s = 4 * batches * (batches * block_s + gather_s)
    print(f"reference k-NN: {block_s * 1e3:.2f} ms per 128x128 block, {gather_s * 1e3:.1f} ms per cat+topk of a 128 x "
          f"{args.n:,} row -> extrapolated {knn_s:,.0f} s for 2 splits x 2 directions ({4 * batches * batches:,} blocks)")  # fmt: skip

    # every later reference phase, measured in full at n on our (exact) k-NN
    timings: dict[str, float] = {}
    as_torch = [(torch.from_numpy(sims), torch.from_numpy(inds)) for sims, inds in captured]
    knns = [(as_torch[0], as_torch[1]), (as_torch[2], as_torch[3])]  # tune x->y, y->x; test x->y, y->x
    ref_tune_f1, ref_test_f1 = reference_pipeline(tune, test, knns, timings)
    rest_s = sum(timings.values())
    reference_s = knn_s + rest_s
    print(f"reference after k-NN, measured at {args.n:,}: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    print(f"reference {reference_s:8.0f} s  (= {reference_s / 3600:.2f} h; k-NN extrapolated, rest measured)   "
          f"tune F1 {ref_tune_f1:.6f}  test F1 {ref_test_f1:.6f}")  # fmt: skip
    print(f"speed-up  {reference_s / ours_s:8.1f} x  (target >= 20 x)")
    print(f"F1 identical at {args.n:,} (same k-NN input): {same_f1((ref_tune_f1, ref_test_f1), (ours.tune.f1, ours.test.f1))}")

    # end to end at a size where the reference k-NN runs in full
    small_tune = make_split(args.ref_n, args.dim, args.gold_fraction, args.noise, args.seed + 10)
    small_test = make_split(args.ref_n, args.dim, args.gold_fraction, args.noise, args.seed + 11)
    start = time.perf_counter()
    small = mining.bucc_mining(small_tune, small_test)
    small_ours_s = time.perf_counter() - start
    start = time.perf_counter()
    knns = [reference_knn_pair(s[0], s[1], K) for s in (small_tune, small_test)]
    small_timings: dict[str, float] = {"knn": time.perf_counter() - start}
    small_ref = reference_pipeline(small_tune, small_test, knns, small_timings)
    small_ref_s = sum(small_timings.values())
    print(f"\nend to end at {args.ref_n:,} x {args.ref_n:,} (reference with its own k-NN): ours {small_ours_s:.2f} s, "
          f"reference {small_ref_s:.1f} s ({small_ref_s / small_ours_s:.0f} x); F1 tune/test ours "
          f"{small.tune.f1:.6f}/{small.test.f1:.6f}, reference {small_ref[0]:.6f}/{small_ref[1]:.6f}; "
          f"identical: {same_f1(small_ref, (small.tune.f1, small.test.f1))}")  # fmt: skip


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def scale(args) -> None:
    import faiss

    print(f"scale: one split of {args.n:,} x {args.n:,}, dim {args.dim}, faiss threads {faiss.omp_get_max_threads()}")
    start = time.perf_counter()
    x, y, gold_src, gold_tgt = make_split(args.n, args.dim, args.gold_fraction, args.noise, args.seed, args.topics)
    print(
        f"data generated in {time.perf_counter() - start:.0f} s; x + y = {(x.nbytes + y.nbytes) / 2**30:.2f} GiB; peak RSS {peak_rss_gib():.2f} GiB"
    )

    sample = min(args.exact_sample, args.n)
    start = time.perf_counter()
    mining.knn(np.ascontiguousarray(x[:sample]), y, K)
    exact_sample_s = time.perf_counter() - start
    print(f"exact IndexFlatIP: {sample:,} queries x {args.n:,} in {exact_sample_s:.1f} s -> both directions "
          f"~{exact_sample_s * args.n / sample * 2 / 60:.0f} min (not run)")  # fmt: skip

    search = mining.IvfSearch(nlist=args.nlist, nprobe=args.nprobe, train_size=args.train_size, seed=args.seed)
    start = time.perf_counter()
    sim_xy, ind_xy = mining.knn(x, y, K, search)
    xy_s = time.perf_counter() - start
    recall_xy = mining.knn_recall(x, y, ind_xy, sample_size=args.recall_sample, seed=args.seed)
    start = time.perf_counter()
    sim_yx, ind_yx = mining.knn(y, x, K, search)
    yx_s = time.perf_counter() - start
    recall_yx = mining.knn_recall(y, x, ind_yx, sample_size=args.recall_sample, seed=args.seed)
    nlist = search.nlist or int(4 * np.sqrt(args.n))
    print(f"IVF (IndexIVFFlat, nlist {nlist}, nprobe {args.nprobe}, trained on {min(args.train_size, args.n):,}): "
          f"x->y {xy_s:.0f} s, y->x {yx_s:.0f} s (train + add + search each)")  # fmt: skip
    print(f"IVF recall@{K} vs exact on {args.recall_sample} sampled queries: x->y {recall_xy:.3f}, y->x {recall_yx:.3f}")

    # the rest of margin_candidates on those k-NN results (same code path as mining.margin_candidates)
    start = time.perf_counter()
    original_knn = mining.knn
    results = iter([(sim_xy, ind_xy), (sim_yx, ind_yx)])
    mining.knn = lambda *a, **k: next(results)
    try:
        pairs = mining.margin_candidates(x, y, K, search)
    finally:
        mining.knn = original_knn
    mask = mining.gold_mask(pairs, gold_src, gold_tgt)
    choice = mining.best_threshold(pairs.score, mask, len(gold_src))
    rest_s = time.perf_counter() - start
    total = xy_s + yx_s + rest_s
    print(f"margins + matching + threshold: {rest_s:.1f} s; total mining {total:.0f} s ({total / 60:.1f} min)")
    print(f"F1 {choice.f1:.4f} (P {choice.precision:.4f} R {choice.recall:.4f}) with the threshold fitted on this same split "
          f"(optimistic); {len(pairs):,} one-to-one candidates, {len(gold_src):,} gold")  # fmt: skip
    print(f"peak RSS {peak_rss_gib():.2f} GiB (includes the {(x.nbytes + y.nbytes) / 2**30:.2f} GiB of input vectors)")


def run_benchmark(quick: bool) -> list[dict]:
    """benchmarks/run_all.py protocol: BUCC mining end to end, ours vs the DAP-style reference with
    its own k-NN, at a size where the reference runs in full (the 100k/1M modes stay manual)."""
    n = 1000 if quick else 4000
    tune = make_split(n, 384, 0.05, 2.5, 10)
    test = make_split(n, 384, 0.05, 2.5, 11)
    start = time.perf_counter()
    ours = mining.bucc_mining(tune, test)
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    knns = [reference_knn_pair(s[0], s[1], K) for s in (tune, test)]
    timings: dict[str, float] = {"knn": time.perf_counter() - start}
    reference = reference_pipeline(tune, test, knns, timings)
    same = same_f1(reference, (ours.tune.f1, ours.test.f1))
    return [
        {
            "case": f"{n:,} x {n:,}, dim 384, k {K}, end to end",
            "measure": "s",
            "stage": ours_s,
            "reference": sum(timings.values()),
            "reference_name": "DAP-style reference",
            "higher_is_better": False,
            "note": f"F1 identical: {same}",
        }
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", action="store_true", help="1M x 1M with an IVF index instead of the comparison")
    parser.add_argument("--n", type=int, default=None, help="sentences per side (default 100000; 1000000 with --scale)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--gold-fraction", type=float, default=0.05, help="share of x rows with a noisy copy in y")
    parser.add_argument("--noise", type=float, default=2.5, help="noise norm relative to the unit vector copied")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ref-n", type=int, default=4000, help="size of the end-to-end reference run")
    parser.add_argument("--ref-knn-rows", type=int, default=1024, help="query rows timed for the reference k-NN")
    parser.add_argument("--topics", type=int, default=0, help="--scale only: draw x and distractors around this many centres")
    parser.add_argument("--nlist", type=int, default=2048)
    parser.add_argument("--nprobe", type=int, default=8)
    parser.add_argument("--train-size", type=int, default=100_000)
    parser.add_argument("--recall-sample", type=int, default=1000)
    parser.add_argument("--exact-sample", type=int, default=5000)
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    if args.n is None:
        args.n = 1_000_000 if args.scale else 100_000
    (scale if args.scale else compare)(args)


if __name__ == "__main__":
    main()
