"""Progress lines reach the terminal even while pytest captures a test's output."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("qnn_env")


def test_progress_bypasses_output_capture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import time
        from pytest_qnn_genai.progress import heartbeat, stderr_writer

        def test_build():
            print("captured stdout")
            with heartbeat("build compile stories260k SM8650-htp-emulator", stderr_writer, 0.2):
                time.sleep(0.5)
    """)
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)
    err = result.stderr.str()
    assert "[qnn-genai] build compile stories260k SM8650-htp-emulator: started" in err
    assert "s elapsed" in err
    assert "[qnn-genai] build compile stories260k SM8650-htp-emulator: done in" in err
    assert "captured stdout" not in result.stdout.str()  # capture itself still works


def test_heartbeat_repeats_with_the_status() -> None:
    import time

    from pytest_qnn_genai.progress import heartbeat

    lines: list[str] = []
    with heartbeat("build runners", lines.append, every_s=0.05, status=lambda: "[42%]"):
        time.sleep(0.3)
    beats = [ln for ln in lines if "elapsed" in ln]
    assert beats and all(ln.endswith("s elapsed, [42%]") for ln in beats), lines
