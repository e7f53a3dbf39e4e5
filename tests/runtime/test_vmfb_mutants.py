"""Issue #12's criterion in the suite: 1,000 mutants of a vmfb holding an npu-fb
executable and a host-fallback ELF (500 inside the ELF, 200 inside the npu-fb, 300
anywhere) end in a result or a StatusError, never a traceback, a dead process or a
hang. See vmfb_mutants.py for how they are made and run."""
from .vmfb_mutants import BAD_OUTCOMES, run_mutants


def test_no_mutant_kills_hangs_or_tracebacks():
    results = run_mutants({"elf": 500, "npu-fb": 200, "anywhere": 300}, seed=0)
    bad = {region: {o: n for o, n in counter.items() if o in BAD_OUTCOMES}
           for region, counter in results.items()}
    assert all(not outcomes for outcomes in bad.values()), bad
    # The mutants reach the loaders and the device: some fail cleanly, some still run.
    for region, counter in results.items():
        assert counter["error"] > 0 and counter["ok"] > 0, (region, counter)
