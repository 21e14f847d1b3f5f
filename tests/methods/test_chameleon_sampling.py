"""CHAMELEON's adaptive sampling and sample synthesis (tunebench.methods.tensor_programs.chameleon.sampling)."""
import numpy as np
import pytest

from tunebench.methods.tensor_programs.chameleon.sampling import adaptive_sample, knee_k, meta_search, mode_config
from tunebench.search_space import ChoiceKnob, Space


def test_knee_is_the_first_k_whose_loss_did_not_fall_by_the_threshold():
    # 8 -> 9 falls 3.3x (> 2.5): go on; 9 -> 10 falls 1.2x: the knee, exit at 10
    assert knee_k({8: 100.0, 9: 30.0, 10: 25.0, 11: 1.0}, 2.5) == 10
    assert knee_k({8: 100.0, 9: 90.0}, 2.5) == 9
    assert knee_k({8: 100.0, 9: 10.0, 10: 1.0}, 2.5) == 10  # never flat: the largest k


def test_meta_search_on_synthetic_clusters_stops_just_past_the_true_number():
    """9 tight, far-apart blobs: 8 clusters must merge two (large loss), 9 fit them (loss falls by far more
    than 2.5x), 10 only split a blob (small fall): the exit is at 10, and the 10 centroids cover all 9 blobs."""
    rng = np.random.default_rng(0)
    centers = np.array([[x, y] for x in (0, 10, 20) for y in (0, 10, 20)], dtype=float)
    X = np.concatenate([c + 0.1 * rng.standard_normal((20, 2)) for c in centers])
    cent = meta_search(X, threshold=2.5, k_range=(8, 64), seed=0)
    assert len(cent) == 10
    nearest_blob = {int(np.argmin(((centers - c) ** 2).sum(axis=1))) for c in cent}
    assert nearest_blob == set(range(9))


def _space():
    return Space([ChoiceKnob("a", (1, 2, 4, 8)), ChoiceKnob("b", (1, 2, 4, 8)), ChoiceKnob("c", (0, 1))])


def test_synthesis_returns_the_per_knob_mode_of_the_valid_candidates():
    space = _space()
    idx = lambda a, b, c: space.from_dict({"a": a, "b": b, "c": c}).index  # noqa: E731
    cands = [idx(2, 8, 1), idx(2, 4, 1), idx(4, 8, 0), idx(2, 1, 1), idx(8, 8, 0)]
    assert space.get(mode_config(space, cands, set())).to_dict() == {"a": 2, "b": 8, "c": 1}
    # without the invalid ones the modes change: a -> 4/8 tie broken to the smaller value, c -> 0
    invalid = {idx(2, 8, 1), idx(2, 4, 1), idx(2, 1, 1)}
    assert space.get(mode_config(space, cands, invalid)).to_dict() == {"a": 4, "b": 8, "c": 0}
    assert mode_config(space, cands, set(cands)) is None


def test_adaptive_sample_never_returns_a_measured_config_and_synthesizes_one():
    space = _space()
    cands = list(range(space.size))  # 32 candidates: k from 8
    first = adaptive_sample(space, cands, visited=set(), invalid=set(), seed=1)
    assert 8 <= len(first) <= 32 and len(set(first)) == len(first)
    visited = set(first[:3])
    stats = {}
    again = adaptive_sample(space, cands, visited=visited, invalid=set(), seed=1, stats=stats)
    assert not set(again) & visited
    mode = mode_config(space, cands, set())
    assert mode in again or mode in visited  # the redundant samples were replaced by the per-knob mode
    assert stats["k"] == len(first) and stats["redundant"] == 3 and stats["synthesized"] == int(mode in again)
    assert adaptive_sample(space, [], visited=set(), invalid=set()) == []


@pytest.mark.parametrize("n", [1, 5, 8])
def test_fewer_candidates_than_the_smallest_k_are_all_sampled(n):
    space = _space()
    assert sorted(adaptive_sample(space, list(range(n)), visited=set(), invalid=set())) == list(range(n))


def test_agent_moves_stay_inside_the_space():
    from tunebench.methods.tensor_programs.chameleon.agent import apply_moves

    space = _space()
    corner = space.from_dict({"a": 1, "b": 8, "c": 1}).index
    assert space.get(apply_moves(space, corner, [-1, 1, 1])).to_dict() == {"a": 1, "b": 8, "c": 1}  # clipped
    assert space.get(apply_moves(space, corner, [1, -1, -1])).to_dict() == {"a": 2, "b": 4, "c": 0}
    rng = np.random.default_rng(0)
    for _ in range(200):
        i = int(rng.integers(space.size))
        assert 0 <= apply_moves(space, i, rng.integers(-1, 2, size=3)) < space.size


def test_agent_learns_to_move_toward_higher_fitness():
    """A synthetic fitness (minus the distance of the knob indices to a target): after a few rounds of
    episodes the agent's end states score clearly better than those of the same agent that does not learn
    (Adam step size 0), which wander as the initial policy does."""
    from tunebench.methods.tensor_programs.chameleon.agent import PPOExplorer, PPOSettings

    space = Space([ChoiceKnob(f"k{j}", tuple(range(8))) for j in range(4)])
    target = np.array([6, 1, 5, 2])

    def fitness(indices):
        return np.array([-np.abs(np.array(space.digits(i)) - target).sum() for i in indices], dtype=float)

    def final_mean(lr):
        agent = PPOExplorer(space, PPOSettings(lr=lr), seed=0)
        starts = list(np.random.default_rng(1).choice(space.size, 16, replace=False))
        means = []
        for _ in range(12):
            agent.explore(starts, fitness, steps=12)
            means.append(fitness(agent.last_states).mean())
        return np.mean(means[-3:]), means[0]

    learned, first = final_mean(1e-3)
    frozen, _ = final_mean(0.0)
    assert learned > frozen + 2.0 and learned > first + 3.0, (learned, frozen, first)


def test_the_episodes_numpy_policy_is_the_networks_forward():
    import torch

    from tunebench.methods.tensor_programs.chameleon.agent import ActorCritic, log_softmax

    torch.manual_seed(0)
    net = ActorCritic(6, 4, 32)
    x = np.random.default_rng(0).random((50, 6), dtype=np.float32)
    logits, v = net.frozen()(x)
    ref_logits, ref_v = net(torch.from_numpy(x))
    np.testing.assert_allclose(logits, ref_logits.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v, ref_v.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(log_softmax(logits), torch.log_softmax(ref_logits, -1).detach().numpy(), atol=1e-5)


def test_chosen_log_prob_is_log_softmax_taken_exactly():
    from tunebench.methods.tensor_programs.chameleon.agent import chosen_log_prob, log_softmax

    rng = np.random.default_rng(3)
    logits = (rng.standard_normal((40, 16, 7, 3)) * 4).astype(np.float32)
    acts = rng.integers(0, 3, size=(40, 16, 7))
    ref = np.take_along_axis(log_softmax(logits), acts[..., None], axis=-1)[..., 0].sum(-1)
    assert np.array_equal(chosen_log_prob(logits, acts), ref)


def _pruned(n_knobs: int = 4, n: int = 6):
    """A listed space: the configs of an n^n_knobs product space whose digits sum to an even number."""
    from tunebench.listed_space import ListedSpace

    rows = [d for d in np.ndindex(*(n,) * n_knobs) if sum(d) % 2 == 0]
    return ListedSpace([ChoiceKnob(f"k{j}", tuple(range(n))) for j in range(n_knobs)], rows)


@pytest.mark.parametrize("listed", [False, True])
@pytest.mark.parametrize("steps, n_starts", [(10, 16), (90, 16), (90, 30)])
def test_the_explorer_gives_the_same_episodes_with_and_without_the_tables(monkeypatch, listed, steps, n_starts):
    """The space's whole feature table (kept when small) and, with more steps than configs, the network's
    outputs for every config looked up per step (the move table too) change nothing: same visited configs,
    same fitness, same end states and the same network after the update, for a seed. With 30 episodes the
    table's values would differ (``batch_exact``): the episodes call the network per step."""
    from tunebench.methods.tensor_programs.chameleon import agent as agent_mod

    space = _pruned() if listed else Space([ChoiceKnob(f"k{j}", tuple(range(6))) for j in range(4)])

    def fitness(indices):
        return -np.abs(space.digit_rows(indices) - 3).sum(axis=1).astype(float)

    def episodes(table_max):
        monkeypatch.setattr(agent_mod, "FEATURE_TABLE_MAX", table_max)
        agent = agent_mod.PPOExplorer(space, seed=5)
        tabled = []
        monkeypatch.setattr(agent, "_episodes_tabled", lambda *a: tabled.append(1) or
                            agent_mod.PPOExplorer._episodes_tabled(agent, *a))
        visited = [agent.explore(list(range(0, 5 * n_starts, 5)), fitness, steps=steps) for _ in range(3)]
        return visited, agent.last_states, [p.detach().numpy().copy() for p in agent.net.parameters()], tabled

    with_table, without = episodes(1 << 24), episodes(0)
    assert (len(with_table[3]), len(without[3])) == ((3 if n_starts == 16 and 16 * steps >= space.size else 0), 0)
    assert with_table[:2] == without[:2]
    assert all(np.array_equal(a, b) for a, b in zip(with_table[2], without[2]))


@pytest.mark.parametrize("listed", [False, True])
def test_the_move_table_reaches_the_configs_apply_moves_reaches(listed, monkeypatch):
    from tunebench.methods.tensor_programs.chameleon import agent as agent_mod

    space = _pruned(3, 5) if listed else Space([ChoiceKnob(f"k{j}", tuple(range(j + 2))) for j in range(3)])
    rng = np.random.default_rng(0)
    states, acts = rng.integers(space.size, size=500), rng.integers(0, 3, size=(500, 3))
    want = [agent_mod.apply_moves(space, int(i), agent_mod.MOVES[a]) for i, a in zip(states, acts)]
    assert agent_mod.Mover(space).step(states, acts).tolist() == want
    monkeypatch.setattr(agent_mod, "LOOKUP_MAX", 0)  # a listed space past the dense table: the sorted search
    assert agent_mod.Mover(space).step(states, acts).tolist() == want


@pytest.mark.parametrize("rows", [16, 30, 100, 127, 128])
def test_the_policy_table_is_used_only_where_it_gives_every_row_what_a_batch_gives_it(rows):
    """Where the probe passes (``batch_exact``), any batch of ``rows`` rows gets the table's values; where
    the explorer would not get them, the probe fails (then the episodes call the network per step)."""
    import torch

    from tunebench.methods.tensor_programs.chameleon.agent import ActorCritic, batch_exact, in_blocks

    torch.manual_seed(0)
    policy = ActorCritic(10, 10, 64).frozen()
    x = np.random.default_rng(0).random((1000, 10), dtype=np.float32)
    logits, values = in_blocks(policy, x, rows)
    rng = np.random.default_rng(1)
    batches = [rng.integers(len(x), size=rows) for _ in range(50)]
    same = all(np.array_equal(policy(x[b])[0], logits[b]) and np.array_equal(policy(x[b])[1], values[b])
               for b in batches)
    assert batch_exact(policy, x, logits, values, rows) == same


@pytest.mark.parametrize("size", [50, 100_000])  # marked configs; a space too large for that: np.unique
def test_unique_ints_is_numpys_unique(size):
    from tunebench.methods.tensor_programs.chameleon.agent import unique_ints

    values = np.random.default_rng(2).integers(size, size=(400,))
    want = np.unique(values, return_index=True, return_inverse=True)
    got = unique_ints(values, size)
    assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(got, want))
