"""The one error mapping of the training core's process entry points: a refusal is one line and exit code 2."""

from __future__ import annotations

import pytest

from autotune.errors import USER_ERROR_EXIT_CODE, InvalidRequestError, exit_code


def test_the_work_s_own_exit_code_comes_back(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(lambda: 0) == 0
    assert exit_code(lambda: 130) == 130
    assert capsys.readouterr().err == ""


def test_a_refusal_is_one_line_on_stderr_and_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    def refuse() -> int:
        raise InvalidRequestError("--max-rows 0:\n  give a positive number   of rows")

    assert exit_code(refuse) == USER_ERROR_EXIT_CODE == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "error: --max-rows 0: give a positive number of rows\n"


def test_a_bug_is_not_a_refusal() -> None:
    def broken() -> int:
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        exit_code(broken)
