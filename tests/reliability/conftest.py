"""The reliability suite (its helpers are in ``tests.reliability.rel_support``)."""
