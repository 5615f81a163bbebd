"""Keep the chatter of third-party loaders out of a library user's terminal.

jieba logs "Building prefix dict..." at DEBUG through a stderr handler it installs on its
own logger, and transformers draws a "Loading weights" progress bar whenever a model
loads. A library must print nothing, and must not change a setting the application owns,
so each is silenced only for the duration of the load and then put back as it was.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["quiet_jieba", "quiet_model_loading", "quiet_quantizer"]

# Loads that silence the same switch are serialised, so that one load's restore cannot
# re-enable a bar another load is still drawing, and the state put back is the user's own.
_LOCK = threading.RLock()


@contextmanager
def quiet_jieba() -> Iterator[None]:
    """Around ``jieba.Tokenizer().initialize()``: its dictionary messages, not its warnings."""
    logger = logging.getLogger("jieba")
    with _LOCK:
        before = logger.level
        if logger.getEffectiveLevel() < logging.WARNING:
            logger.setLevel(logging.WARNING)
        try:
            yield
        finally:
            logger.setLevel(before)


@contextmanager
def quiet_quantizer() -> Iterator[None]:
    """Around onnxruntime's ``quantize_dynamic``: it logs through the root logger, whose first
    use would configure logging for the whole application (``logging.basicConfig``), and warns;
    the root logger gets a sink for the duration (only if it has no handler of its own)."""
    root_logger = logging.getLogger()
    with _LOCK:
        sink = None if root_logger.handlers else logging.NullHandler()
        if sink is not None:
            root_logger.addHandler(sink)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                yield
        finally:
            if sink is not None:
                root_logger.removeHandler(sink)


@contextmanager
def quiet_model_loading() -> Iterator[None]:
    """Around loading a sentence-transformers / transformers model: no progress bars."""
    try:
        from transformers.utils import logging as tf_logging
    except ImportError:  # sentence-transformers without transformers cannot load; let it say so
        yield
        return
    set_hook = getattr(tf_logging, "set_tqdm_hook", None)
    with _LOCK:
        if set_hook is not None:
            # transformers >= 5: a hook that returns the previous one, so nothing global is flipped.
            previous: Any = None

            def silent(factory: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
                kwargs = {**kwargs, "disable": True}
                return previous(factory, args, kwargs) if previous is not None else factory(*args, **kwargs)

            previous = set_hook(silent)
            try:
                yield
            finally:
                set_hook(previous)
            return
        # Older transformers: the bar switch itself, put back only if it was on.
        was_on = tf_logging.is_progress_bar_enabled()
        if was_on:
            tf_logging.disable_progress_bar()
        try:
            yield
        finally:
            if was_on:
                tf_logging.enable_progress_bar()
