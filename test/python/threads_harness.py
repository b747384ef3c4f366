"""Run test workers on several threads at once (the concurrency tests of the wrapper's
arena and the default-mode CUDA graphs)."""


def run_threads(threads) -> None:
    """Start every thread, then wait for all of them."""
    for t in threads:
        t.start()
    for t in threads:
        t.join()
