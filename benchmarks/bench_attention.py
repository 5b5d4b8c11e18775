"""How much does writing attention out by hand cost, next to torch's fused kernels?

Forward only, no mask, torch.no_grad, 1 thread; median of REPEATS timed calls after WARMUP calls.
Every ratio compares two timings taken in this same run, on this machine.

    .venv/bin/python benchmarks/bench_attention.py
"""

import torch
import torch.nn.functional as F
from torch import nn

from minformers.attention import MultiHeadAttention, scaled_dot_product_attention
from minformers.convert.pytorch import load_torch_multihead_attention
from minformers.support.measure import median_time
from minformers.support.runtime import seed_everything

B, H, D = 4, 4, 32
D_MODEL = H * D  # 128
LENGTHS = (128, 256, 512, 1024)
WARMUP, REPEATS = 2, 7


def median_ms(function) -> float:
    return 1000 * median_time(function, repeats=REPEATS, warmup=WARMUP)


@torch.no_grad()
def main() -> None:
    seed_everything(0, threads=1)
    torch_mha = nn.MultiheadAttention(D_MODEL, H, batch_first=True).eval()
    ours_mha = load_torch_multihead_attention(MultiHeadAttention(D_MODEL, H), torch_mha).eval()
    header = ("T", "ours sdpa", "torch sdpa", "ratio", "ours MHA", "torch MHA", "ratio")
    print("times in ms (median); ratio = ours / torch")
    print("{:>5} | {:>10} {:>10} {:>6} | {:>10} {:>10} {:>6}".format(*header))
    for T in LENGTHS:
        q, k, v = (torch.randn(B, H, T, D) for _ in range(3))  # (B, H, T, D)
        x = torch.randn(B, T, D_MODEL)  # (B, T, C)
        ours_sdpa = median_ms(lambda: scaled_dot_product_attention(q, k, v))  # noqa: B023 (timed right here)
        torch_sdpa = median_ms(lambda: F.scaled_dot_product_attention(q, k, v))  # noqa: B023
        ours_block = median_ms(lambda: ours_mha(x))  # noqa: B023
        # need_weights=False lets torch skip materialising the weights, its fastest path.
        torch_block = median_ms(lambda: torch_mha(x, x, x, need_weights=False))  # noqa: B023
        assert torch.allclose(ours_mha(x), torch_mha(x, x, x, need_weights=False)[0], atol=1e-5)
        print(
            f"{T:>5} | {ours_sdpa:>10.2f} {torch_sdpa:>10.2f} {ours_sdpa / torch_sdpa:>6.2f} | "
            f"{ours_block:>10.2f} {torch_block:>10.2f} {ours_block / torch_block:>6.2f}"
        )


if __name__ == "__main__":
    main()
