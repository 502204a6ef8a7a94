"""``benchmarks/peers.py`` without the authors' clones: each workload that needs one is skipped with a message that
names what is missing, nothing is recorded, and the run succeeds (the timing itself needs the clones)."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_workload_whose_clone_is_absent_is_skipped_with_a_message(tmp_path):
    not_a_clone = tmp_path / "mi-ntk"
    not_a_clone.mkdir()
    out = tmp_path / "records.jsonl"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "peers.py"), "--only", "05_top200_eig",
                           "02_ace_analysis", "--authors-repo-ntk", str(not_a_clone), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"[05_top200_eig] skipped: {not_a_clone} lacks" in done.stdout
    assert "not a clone of jylin04/mi-ntk" in done.stdout
    assert "[02_ace_analysis] skipped: no --authors-repo-ace given" in done.stdout
    assert not out.exists()
