"""Deterministic checks of every LLM answer, applied before anything is used or stored.

They do not depend on a model, so a weak model cannot pass its own junk (a grader that is
the same small model grades "..." 9/10). Both backends go through them: the LLM backend's
answers and the offline backend's rules share one implementation.

- ``words``: content words (Snowball stems, stop words out) and how many of a text's are
  found in another text: the grounding measure
- ``context``: title and summary checks (letters, no placeholder, no echo of the prompt; a
  summary is a sentence sharing content words with the text)
- ``propositions``: proposition checks (grounded in the chunk, its header and the document
  title; a minimum of words; no duplicate within the chunk)

Each check answers a short reason (stored in lineage) or None when the answer passes.
"""

# Of the title and summary checks, which judge an answer before it is cached and a cached
# answer before it is used: part of the pipeline fingerprint only, so changing one re-checks
# every indexed document's title and summary on the next run, and asks again only those the
# checks now reject.
CHECKS_VERSION = "checks-v1"
# Of the proposition checks, which judge cached answers on every run: part of the pipeline
# fingerprint only, so changing one re-checks every indexed document on the next run without
# asking the LLM again. propositions-v2: a duplicate keeps its words' order.
PROPOSITION_CHECKS_VERSION = "propositions-v2"
