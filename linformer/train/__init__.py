"""Training: one core (``core.Trainer``) and the loops that plug into it (``pretrain``, ``finetune``).

Library functions take a composed config and a run directory; the scripts are thin Hydra wrappers. Importing this
package registers the config resolvers that name runs (``settings``)."""

from . import settings  # noqa: F401  (registers the run-name resolvers)
