"""The rule sets behind ``propdex.llm.offline.OfflineBackend``, one module per step.

- ``text``: line joining, tokens, the compact verb lexicon, sentence segmentation (pysbd)
- ``titles``: the document title
- ``summaries``: the one-sentence summary
- ``propositions``: sentence clean-up, fragment filtering, limits
- ``clauses``: splitting coordinated independent clauses
- ``pronouns``: replacing leading pronouns and "we"/"our"
- ``grading``: the four 1..10 scores

Every function here is pure (no shared mutable state except a per-thread pysbd segmenter),
so the backend is deterministic and thread-safe.
"""
