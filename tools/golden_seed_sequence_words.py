"""Golden values for lockstep_rng's SeedSequence on inputs of many words, from real NumPy.

NumPy's SeedSequence mixes the entropy words, then (with a spawn key) zero padding up to the
pool size and each spawn-key integer's 32-bit words, into its pool. lockstep assembles those
words on the stack for short inputs and on the heap for long ones, so the cases run from one
word to well past that limit (24 words), with spawn keys of large integers and several pool
sizes. Writes, for each case, the pool and generate_state(6) to
tests/golden/state/numpy_seed_sequence_words.json.
Rerun: python3 tools/golden_seed_sequence_words.py
"""
import json
import numpy as np

OUT = "tests/golden/state/numpy_seed_sequence_words.json"

KEY_INTS = [0, 1, 2**32 - 1, 2**32, 2**64 + 5, 2**128 - 1, 12345678901234567890]


def main():
    cases = []
    for n_words in [1, 3, 4, 5, 9, 20, 23, 24, 25, 31, 40]:
        entropy = [(0x9E3779B9 * (i + 1)) % 2**32 for i in range(n_words)]
        for n_keys in [0, 1, 2, 5, 8]:
            key = [KEY_INTS[(i * 3 + n_words) % len(KEY_INTS)] for i in range(n_keys)]
            for pool_size in [4, 5, 9]:
                ss = np.random.SeedSequence(np.array(entropy, dtype=np.uint32),
                                            spawn_key=tuple(key), pool_size=pool_size)
                cases.append({
                    "entropy": entropy,
                    "spawn_key": [str(k) for k in key],
                    "pool_size": pool_size,
                    "pool": [int(x) for x in ss.pool],
                    "state_u32": [int(x) for x in ss.generate_state(6)],
                })
    with open(OUT, "w") as f:
        json.dump({"numpy": np.__version__, "cases": cases}, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
