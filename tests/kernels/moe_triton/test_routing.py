"""Routing metadata of the MoE kernels (truepeak.kernels.moe_triton.routing): sorted, padded slots per expert and the
mean tokens per expert, on hand-worked examples."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from truepeak.errors import TruepeakError  # noqa: E402
from truepeak.kernels import moe_triton as mt  # noqa: E402


def test_align_routing_hand_example():
    # docstring example: ids [[0, 2], [2, 1]], E = 3, block_m = 2
    a = mt.align_routing(torch.tensor([[0, 2], [2, 1]]), 3, 2)
    assert a.counts.tolist() == [1, 1, 2]
    assert a.sorted_slots.tolist() == [0, 4, 3, 4, 1, 2]
    assert a.block_expert.tolist() == [0, 1, 2]
    assert a.num_blocks == 3 and a.num_slots == 4


def test_align_routing_pads_and_drops_foreign_slots():
    # expert 1 gets 5 slots -> 2 blocks of 4 (3 padding rows); expert 0 none; -1 and 7 (not local) dropped
    ids = torch.tensor([[1, -1], [1, 7], [1, 2], [1, 1]])
    a = mt.align_routing(ids, 3, 4)
    assert a.counts.tolist() == [0, 5, 1]
    assert a.num_blocks == 3 and a.block_expert.tolist() == [1, 1, 2]
    assert a.sorted_slots.tolist() == [0, 2, 4, 6, 7, 8, 8, 8, 5, 8, 8, 8]


def test_align_routing_bad_input():
    with pytest.raises(TruepeakError, match=r"\[T, top_k\]"):
        mt.align_routing(torch.tensor([1, 2]), 4, 16)
    with pytest.raises(TruepeakError, match="positive"):
        mt.align_routing(torch.tensor([[1, 2]]), 4, 0)


def test_mean_tokens_per_expert_counts_local_slots_over_experts_with_tokens():
    # slots 0, 1, 1, 3, 1 and a foreign -1 and 7 (E = 4): 5 local slots over 3 experts with tokens = 5 / 3
    ids = torch.tensor([[0, 1], [1, 3], [1, -1], [7, -1]])
    assert mt.mean_tokens_per_expert(ids, 4) == pytest.approx(5 / 3)
    # no local slot (another rank's experts only) and an empty batch: 1, the smallest key
    assert mt.mean_tokens_per_expert(torch.full((3, 2), -1), 4) == 1.0
    assert mt.mean_tokens_per_expert(torch.zeros(0, 2, dtype=torch.long), 4) == 1.0


def test_busy_experts_hand_examples():
    # counts [1, 0, 20, 3]: mean over the 3 active experts 8, so busy = more than 16 tokens: expert 2
    assert mt.busy_experts([1, 0, 20, 3]) == [False, False, True, False]
    # ... unless the other experts' token block holds its 20 tokens anyway
    assert mt.busy_experts([1, 0, 20, 3], light_block_m=32) is None
    assert mt.busy_experts([1, 0, 20, 3], light_block_m=16) == [False, False, True, False]
    # exactly 2 x the mean is not more than it: [4, 1, 1] has mean 2, 4 is not > 4
    assert mt.busy_experts([4, 1, 1]) is None
    # uniform counts, no tokens, no experts -> None
    assert mt.busy_experts([8, 8, 8, 8]) is None and mt.busy_experts([0, 0]) is None and mt.busy_experts([]) is None
    # numpy integers and 1-D integer tensors are counts too
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    for counts in (np.array([1, 0, 20, 3]), torch.tensor([1, 0, 20, 3]), [np.int64(1), 0, 20, 3]):
        assert mt.busy_experts(counts, np.int64(16)) == [False, False, True, False]


@pytest.mark.parametrize("counts, block", [([1, -2], None), ([1.5, 2], None), ([True, 2], None), ([1, 2], 0),
                                           ([1, 2], True)])
def test_busy_experts_bad_input(counts, block):
    with pytest.raises(TruepeakError, match="counts must be integers|light_block_m must be"):
        mt.busy_experts(counts, block)


@pytest.mark.parametrize("counts", [None, {0: 1, 1: 20}, (c for c in [1, 0, 20, 3]), "1,0,20", "0-d", "2-d"])
def test_busy_experts_wants_a_sequence(counts):
    # a generator would be used up by the check, a dict's keys are not counts; tensors must be 1-D
    if counts in ("0-d", "2-d"):
        torch = pytest.importorskip("torch")
        counts = torch.tensor(5) if counts == "0-d" else torch.tensor([[1, 0], [20, 3]])
    with pytest.raises(TruepeakError, match="counts must be a 1-D sequence of integers >= 0"):
        mt.busy_experts(counts)
