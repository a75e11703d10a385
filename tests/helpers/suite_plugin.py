"""How the suite runs: the tests that start the training core are marked by what they call, and left out of plain
``pytest``; Ctrl-C ends the session; torch's C++ extensions are built once per virtual environment.

- **Marked by what they do.** A test is marked ``slow`` when its code — or a fixture it requests, or a function of
  the test folders it calls, followed transitively, imports inside functions included — reaches
  :func:`trainer_helpers.trainer_env`, the environment every run of the training core in the tests is started with
  (``trainer_helpers.run_command``, ``run_trainer``, ``run_torchrun`` and ``launch``, an in-process ``autotune
  launch``, use it). A test that starts the core another way fails: an audit hook sees every ``subprocess.Popen``
  whose arguments hold the word ``autotune.trainer`` or one of its modules (the dataset scan ``autotune plan
  --dataset`` starts, the export child), and :func:`pytest_runtest_call` fails an unmarked test that made one; such
  a test is marked by hand, with the process it starts. (A few tests are marked ``slow`` by hand for another reason,
  e.g. torch traces in-process, a time fit over every seed row (``calibrate --with-seeds``, 20–30 s), or a script under
  test that starts those processes itself.)
- **Shared runs.** Tests that request a session- or module-scoped fixture that starts the core get one
  ``xdist_group``, and ``-n`` distributes by ``loadgroup``: one worker runs the core once for all of them.
- **The inner loop.** ``pytest`` alone leaves the ``slow`` tests out (the summary says how many); ``--all`` (README's
  test command, ``.ci/run``), a ``-m`` expression or a test id (``file::test``) selects them. The slow tests are
  ordered first, so that under ``pytest-xdist`` the long runs start while the short tests fill the gaps.
- **Ctrl-C.** The CLI turns ``KeyboardInterrupt`` into exit code 130, and ``autotune launch`` forwards SIGINT to its
  run and returns 130: a test running either in-process saw a failed assertion, and the session went on. Every
  SIGINT this process receives is written to a wakeup pipe (:func:`signal.set_wakeup_fd`, whatever handler is
  installed); after each test phase that received one, :class:`KeyboardInterrupt` is raised, which ends the session.
  A test that sends itself SIGINT on purpose requests the ``sends_itself_sigint`` fixture.
- **torch extensions.** DeepSpeed JIT-builds ``cpu_adam`` (minutes) into ``$TORCH_EXTENSIONS_DIR``: that is
  ``<venv>/torch-extensions`` here, kept between sessions. A build killed there leaves its ``lock`` file and torch's
  ``FileBaton`` would wait on it forever, so the first session that finds no other session using the directory (an
  exclusive ``flock``) removes the ``lock`` files; every session holds a shared ``flock`` while it runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import signal
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

TESTS = Path(__file__).resolve().parent.parent
CORE_MODULE = "autotune.trainer"
"""A subprocess with this word, or a module of this package (``autotune.trainer.lengths``, the dataset scan;
``autotune.trainer.export``), among its arguments (``python -m autotune.trainer``, or ``torchrun ... -m
autotune.trainer`` through the launcher's wrapper) starts the training core: each imports the training stack (torch,
transformers, peft), seconds of CPU per start before it does anything."""


def starts_core_process(word: str) -> bool:
    """Whether one argument of a new process names the training core package or one of its modules."""
    return word == CORE_MODULE or word.startswith(CORE_MODULE + ".")


EXTENSIONS_DIR_NAME = "torch-extensions"

if str(TESTS / "integration") not in sys.path:  # trainer_helpers, importable by bare name from every test folder
    sys.path.insert(0, str(TESTS / "integration"))


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--all``: also run the tests that start the training core (README's test command)."""
    parser.addoption(
        "--all",
        action="store_true",
        default=False,
        help="also run the tests that start the training core (marked slow; plain pytest leaves them out)",
    )


# --- marking by what a test calls ------------------------------------------------------------------------------------


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


@functools.cache
def _file_in_tests(filename: str) -> bool:
    return Path(filename).resolve().is_relative_to(TESTS)


def _in_tests(obj: Any) -> bool:
    code = getattr(obj, "__code__", None)
    return isinstance(code, types.CodeType) and _file_in_tests(code.co_filename)


def _test_module(value: object) -> bool:
    """A module of the test folders (``trainer_helpers``, ``cli_runner``, ...): only their attributes are followed, so
    that no library's lazy ``__getattr__`` runs (imports, deprecation warnings) at collection."""
    file = getattr(value, "__file__", None)
    return isinstance(value, types.ModuleType) and isinstance(file, str) and _file_in_tests(file)


def _referenced(function: Callable[..., Any]) -> Iterator[Any]:
    """The objects ``function``'s code names: its globals, and attributes of the test folders' modules it names
    (``import x`` and ``from x import y`` inside a function included)."""
    namespace = getattr(function, "__globals__", {})
    for code in _code_objects(function.__code__):
        names = code.co_names
        modules = [m for m in (namespace.get(n, sys.modules.get(n)) for n in names) if _test_module(m)]
        for name in names:
            if name in namespace:
                yield namespace[name]
            for module in modules:
                value = getattr(module, name, None)
                if value is not None:
                    yield value


def reaches(function: Callable[..., Any], targets: tuple[object, ...], seen: set[types.CodeType]) -> bool:
    """Whether ``function`` calls one of ``targets``, itself or through the functions of the test folders it names."""
    code = getattr(function, "__code__", None)
    if code is None or code in seen:
        return False
    seen.add(code)
    for value in _referenced(function):
        if any(value is target for target in targets):
            return True
        wrapped = getattr(value, "__wrapped__", value)  # a fixture or a decorated helper
        if _in_tests(wrapped) and reaches(wrapped, targets, seen):
            return True
    return False


def _core_starters() -> tuple[object, ...]:
    """:func:`trainer_helpers.trainer_env`, the one object every way of starting the core in a subprocess names."""
    import trainer_helpers

    return (trainer_helpers.trainer_env,)


def starts_the_core(item: pytest.Item, targets: tuple[object, ...]) -> bool:
    """Whether the test, or a fixture it requests, reaches one of ``targets`` (see the module docstring)."""
    if not isinstance(item, pytest.Function):
        return False
    seen: set[types.CodeType] = set()
    functions = [item.function]
    for definitions in item._fixtureinfo.name2fixturedefs.values():
        functions.extend(definition.func for definition in definitions)
    return any(_in_tests(f) and reaches(f, targets, seen) for f in functions)


def shared_run(item: pytest.Item, targets: tuple[object, ...]) -> str | None:
    """The group of a test that requests a session- or module-scoped fixture that starts the core (a run its tests
    share): the fixture's name, with the module's path for a module-scoped one; None if it requests none."""
    if not isinstance(item, pytest.Function):
        return None
    for name, definitions in item._fixtureinfo.name2fixturedefs.items():
        for definition in definitions:
            shared = definition.scope in ("session", "module") and _in_tests(definition.func)
            if shared and reaches(definition.func, targets, set()):
                return name if definition.scope == "session" else f"{item.path}::{name}"
    return None


def _runs_everything(config: pytest.Config) -> bool:
    return bool(config.getoption("--all") or config.option.markexpr or any("::" in arg for arg in config.args))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that start the training core ``slow``; leave them out unless asked; order them first."""
    targets = _core_starters() if items else ()
    for item in items:
        if item.get_closest_marker("slow") is None and starts_the_core(item, targets):
            item.add_marker(pytest.mark.slow)
        if (group := shared_run(item, targets)) is not None:  # one worker builds it (--dist loadgroup)
            item.add_marker(pytest.mark.xdist_group(group))
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    fast = [item for item in items if item.get_closest_marker("slow") is None]
    if _runs_everything(config):
        items[:] = slow + fast
        return
    if slow:
        config.hook.pytest_deselected(items=slow)
        config.stash[_LEFT_OUT] = len(slow)
    items[:] = fast


_LEFT_OUT = pytest.StashKey[int]()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands the number it left out to the controller (:func:`pytest_testnodedown`)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["left_out"] = session.config.stash.get(_LEFT_OUT, 0)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """The controller keeps the number its workers left out (each collects every test: the largest is the count)."""
    left_out = getattr(node, "workeroutput", {}).get("left_out", 0)
    node.config.stash[_LEFT_OUT] = max(node.config.stash.get(_LEFT_OUT, 0), left_out)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Say how many tests that start the training core plain ``pytest`` left out, and how to run them."""
    left_out = config.stash.get(_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(
            f"left out {left_out} slow tests (they start the training core, trace torch or refit every seed row): "
            "`pytest --all` runs every test"
        )


# --- the guard: a test that starts the core is marked -----------------------------------------------------------------

_CORE_STARTED: list[str] = []
_WATCHING: list[bool] = [False]


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "subprocess.Popen" or not _WATCHING[0]:
        return
    argv = args[1]
    words = [argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv or ())
    if any(starts_core_process(os.fsdecode(word)) for word in words):
        _CORE_STARTED.append(" ".join(os.fsdecode(word) for word in words))


# --- Ctrl-C ends the session ------------------------------------------------------------------------------------------

_WAKEUP: list[int] = []  # the read and write ends of the wakeup pipe, once installed
_OWN_SIGINT: list[bool] = [False]


def _install_wakeup_pipe() -> None:
    if threading_is_main():
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        _WAKEUP.extend((read_fd, write_fd))


def threading_is_main() -> bool:
    """Whether this is the main thread (only it can set the wakeup fd)."""
    import threading

    return threading.current_thread() is threading.main_thread()


def _received_sigint() -> bool:
    if not _WAKEUP:
        return False
    received = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(_WAKEUP[0], 512):
            received += chunk
    return int(signal.SIGINT) in received


@pytest.fixture
def sends_itself_sigint() -> Iterator[None]:
    """The test sends this process SIGINT on purpose: that one does not end the session."""
    _OWN_SIGINT[0] = True
    yield
    _received_sigint()
    _OWN_SIGINT[0] = False


def _phase(item: pytest.Item, check_core: bool) -> Iterator[None]:
    _received_sigint()  # what arrived between tests was handled by pytest itself
    if _WAKEUP and threading_is_main():  # ours again, should a test's event loop have replaced it
        signal.set_wakeup_fd(_WAKEUP[1], warn_on_full_buffer=False)
    _WATCHING[0] = True
    _CORE_STARTED.clear()
    try:
        yield
    finally:
        _WATCHING[0] = False
        if _received_sigint() and not _OWN_SIGINT[0]:
            raise KeyboardInterrupt
    if check_core and _CORE_STARTED and item.get_closest_marker("slow") is None:
        pytest.fail(
            f"this test starts the training core ({_CORE_STARTED[0][:200]}) but is not marked slow: start it with "
            "trainer_helpers (run_command, run_trainer, trainer_env), which marks it, or mark it @pytest.mark.slow",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """Setup: Ctrl-C ends the session; a fixture that starts the core marks its tests (checked here)."""
    yield from _phase(item, check_core=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Call: Ctrl-C ends the session; an unmarked test that started the training core fails."""
    yield from _phase(item, check_core=True)


# --- torch extensions built once per virtual environment --------------------------------------------------------------

_SESSION_LOCK: list[IO[str]] = []


def extensions_dir(prefix: Path) -> tuple[Path, IO[str] | None]:
    """``PREFIX/torch-extensions`` and the open file holding this session's shared lock on it, with stale build locks
    removed when no other session uses it; a fresh temporary directory (and no lock) where PREFIX is not writable."""
    root = prefix / EXTENSIONS_DIR_NAME
    try:
        root.mkdir(exist_ok=True)
        handle = (root / ".sessions").open("a")
    except OSError:
        return Path(tempfile.mkdtemp(prefix="torch-extensions-")), None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for lock in root.glob("*/lock"):  # no session is building: a killed build left it
            lock.unlink(missing_ok=True)
    except BlockingIOError:
        pass  # another session is running: its builds hold their locks
    fcntl.flock(handle, fcntl.LOCK_SH)
    return root, handle


def pytest_configure(config: pytest.Config) -> None:
    """Install the guard and the wakeup pipe; point ``TORCH_EXTENSIONS_DIR`` at the venv's directory."""
    sys.addaudithook(_audit)
    _install_wakeup_pipe()
    if not hasattr(config, "workerinput"):  # the controller (or a plain session); xdist workers inherit it
        root, handle = extensions_dir(Path(sys.prefix))
        os.environ["TORCH_EXTENSIONS_DIR"] = str(root)
        if handle is not None:
            _SESSION_LOCK.append(handle)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Release the shared lock on the extensions directory."""
    for handle in _SESSION_LOCK:
        handle.close()
    _SESSION_LOCK.clear()
