"""kafkawire's conformance suite: the same requests to kafkawire and to Apache Kafka, answers compared.

Entry point: ``tools/conformance.py``. Parts:

- ``transport``: one raw socket per case, kafkawire's own codec, outcomes as values.
- ``build``: a request for a version from one description (fields the version lacks are dropped).
- ``corpus``: the cases, each a sequence of steps run on both brokers.
- ``normalise``: what is allowed to differ between two correct brokers, in one place.
- ``compare``: field-by-field differences of two normalised answers.
- ``explained.toml`` / ``explain``: differences that have a written reason.
- ``runner``: starts the brokers, runs the corpus, tabulates.
"""
