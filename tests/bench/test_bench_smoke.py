"""The benchmarks' cores at tiny sizes, so the scripts in bench/ cannot rot unnoticed.

Each test runs the code a benchmark runs (child-process measurement, synthetic runs the report reads,
kvgate's control pass through the runner, the growth measurements, the harness comparison on the
embedded model) and checks what it measured, not only that it ran.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_report  # noqa: E402
import common  # noqa: E402
import growth  # noqa: E402
import startup  # noqa: E402
import workloads  # noqa: E402
from kvgate_pass import KvgateControl  # noqa: E402


@pytest.fixture
def results_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Sections and RESULTS.md go to a temp dir, never over the committed ones."""
    monkeypatch.setattr(common, "RESULTS_DIR", tmp_path / "results")
    monkeypatch.setattr(common, "RESULTS_MD", tmp_path / "RESULTS.md")
    return tmp_path


def test_run_child_measures_its_own_child_and_kills_on_timeout() -> None:
    grow = "x = bytearray(200 * 1024 * 1024); x[::4096] = b'1' * len(x[::4096]); print('done')"
    child = common.run_child([sys.executable, "-c", grow], timeout_s=60)
    assert child.returncode == 0 and child.stdout.strip() == "done"
    assert child.peak_rss_mib >= 200 and child.wall_s > 0
    # Linux carries the spawning process's peak RSS into an exec'd child's ru_maxrss, so a child of a large
    # process (pytest with torch loaded) reads high; the benchmarks spawn from small driver processes.
    slow = common.run_child([sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=0.5)
    assert slow.timed_out and slow.returncode != 0 and slow.wall_s < 20


def test_sides_alternate_each_first_in_turn() -> None:
    calls: list[tuple[str, int]] = []
    got = common.alternated(["a", "b", "c"], 4, lambda name, rep: calls.append((name, rep)) or f"{name}{rep}")
    assert [n for n, _ in calls] == [*"abc", *"bca", *"cab", *"abc"]
    assert got == {n: [f"{n}{r}" for r in range(4)] for n in "abc"}
    assert common.rotated(("x", "y"), 1) == ["y", "x"] and common.rotated(["x", "y"], 2) == ["x", "y"]


def test_sections_render_in_order_and_keep_the_others(results_dir: Path) -> None:
    common.write_section("startup", "## Start-up\n", {"x": 1})
    common.write_section("growth", "## Growth\n", {"y": 2})
    text = (results_dir / "RESULTS.md").read_text()
    assert text.index("## Growth") < text.index("## Start-up")
    assert json.loads((results_dir / "results" / "growth.json").read_text())["data"] == {"y": 2}


def test_hand_measured_sections_survive_a_benchmark_run(results_dir: Path) -> None:
    (results_dir / "results").mkdir()
    (results_dir / "results" / "sequential_real.md").write_text("## Measured by hand\n\n- 3 runs\n")
    common.write_section("startup", "## Start-up\n", {"x": 1})
    text = (results_dir / "RESULTS.md").read_text()
    assert "## Measured by hand\n\n- 3 runs\n" in text and "## Start-up" in text
    (results_dir / "results" / "startup.md").write_text("## Start-up by hand\n")
    with pytest.raises(SystemExit, match=r"both startup\.json and startup\.md"):
        common.render_results()


def test_synthetic_run_is_a_run_the_report_reads(tmp_path: Path) -> None:
    from kvgate.report.analysis.build import build_report

    run_dir = workloads.synthetic_run(tmp_path, n_cases=40, rows_per_part=16)
    assert len(list(run_dir.glob("results/full/part-*.parquet"))) == 6  # two replicates × 3 parts
    report = build_report(run_dir)
    assert report.control.n == 40
    assert report.run.n_cases == 40


def test_the_compacted_copy_holds_the_same_rows_in_one_part_per_arm(tmp_path: Path) -> None:
    from kvgate.report.analysis.build import build_report
    from kvgate.report.render.formats import render_json

    run_dir = workloads.synthetic_run(tmp_path, n_cases=40, rows_per_part=16)
    copy = bench_report.compacted_copy(run_dir, tmp_path / "copies")
    arms = {p.parent.name: p.name for p in copy.glob("results/*/part-*.parquet")}
    assert sorted(arms) == sorted(p.name for p in run_dir.glob("results/*") if p.is_dir())
    assert len(list(copy.glob("results/*/part-*.parquet"))) == len(arms)  # one part per arm
    assert len(list(run_dir.glob("results/*/part-*.parquet"))) > len(arms)  # the original left alone
    assert render_json(build_report(copy)) == render_json(build_report(run_dir))


def test_kvgate_control_pass_through_the_runner(tmp_path: Path) -> None:
    workload = tmp_path / "w.parquet"
    workloads.synthetic_workload(workload, 6)
    control = KvgateControl("fake", "smollm2-135m")
    timing = control.run(workload, tmp_path / "run", batch_size=2)
    control.close()
    assert [tokens != [] for tokens in timing.outputs] == [True] * 6
    assert timing.pass_s >= timing.engine_generate_s >= 0 and timing.generate_s <= timing.pass_s
    assert {p.parent.name for p in (tmp_path / "run").glob("results/*/part-*.parquet")} == {"full"}


@pytest.mark.slow  # fresh processes for each point
def test_growth_measures_freeze_run_and_report_in_fresh_processes(tmp_path: Path) -> None:
    points = growth.run_growth((40,), max_freeze=40, max_run=40, root=tmp_path)
    assert [(p.op, p.rows, p.how) for p in points] == [
        ("freeze", 40, "measured"),
        ("run", 40, "measured"),
        ("report", 40, "measured"),
    ]
    assert all(p.wall_s > 0 and p.peak_rss_mib > 20 for p in points)
    text = growth.section(points, ["bench/growth.py"], "0 0 0", [], 1024)
    assert "| run | 40 |" in text and "n/a" in text  # one size: no growth exponent, no 10⁶ target


def test_growth_projection_is_linear_in_the_last_decade() -> None:
    a = growth.Point("run", 1_000, 2.0, 100.0, 1.0, "measured")
    b = growth.Point("run", 10_000, 11.0, 120.0, 10.0, "measured")
    p = growth.project([a, b], 100_000)
    assert p.how == "projected"
    assert (p.wall_s, p.peak_rss_mib) == (pytest.approx(101.0), pytest.approx(320.0))
    c = growth.Point("run", 100_000, 101.0, 300.0, 100.0, "measured")
    assert growth.growth_exponent([a, b, c]) == pytest.approx(1.0)


def test_import_profile_names_packages_and_who_imported_them() -> None:
    # every package listed: most take under a millisecond, so a top 10 by time is noise under load
    text = startup.import_profile(["-c", "import json"], top=1000)
    assert "| `json` |" in text and text.startswith("imports take")


@pytest.mark.model
def test_harness_sides_make_the_same_generations(tmp_path: Path) -> None:
    import harness_overhead

    sizes = harness_overhead.Sizes(cases=1, length=128, reps=1, batch_size=1)
    harness_overhead.set_threads(1)
    measured, info = harness_overhead.measure("hf", sizes, tmp_path, log=lambda _: None)
    assert measured.same_outputs == [True]
    assert set(measured.wall_s) == {"model.generate", "greedy loop", "kvgate"}
    assert measured.ratio("model.generate") > 0 and info["workload_cases"] == 1


@pytest.mark.model  # the embedded model's tokenizer
def test_freeze_4k_side_by_side_gives_identical_ids_and_counts_probes(tmp_path: Path) -> None:
    import freeze_4k

    side = freeze_4k.side_by_side(2, tmp_path)
    assert side["chunked_prompts_counted"] == side["whole_prompts_counted"] >= 2
    assert side["speedup"] > 0 and 3000 < side["tokens_per_prompt"] <= 4096
    assert "encode" in freeze_4k.profile_freeze(1, tmp_path)
