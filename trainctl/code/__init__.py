"""Code travels: the submitter's working directory and packages, shipped with the job.

A job on a cluster runs in its image, where the submitter's ``train.py`` is not. Instead
of building and pushing an image, trainctl packs the working directory into a
deterministic tar.gz (:mod:`.snapshot`; ignore rules in :mod:`.ignore`, credential-like
files held back by :mod:`.credentials`, bounded reads of regular files in :mod:`.regular`),
stores it in ConfigMaps named by its hash, and gives every replica an init container that
joins, verifies and unpacks it into an emptyDir at the container's workingDir (:mod:`.pods`).
The init container runs :mod:`.unpack` and the replica's command runs under
:mod:`.pipwrap` when ``--pip``/``--requirements`` ask for packages: both are scripts
of the standard library only, whose source travels in the pod spec as data, so the
replica's own image (with ``python3``) needs nothing from trainctl.

The local backend runs from a snapshot too when ``--workdir`` is given (unpacked in the
job's state directory, so edits made while it runs do not reach it); see
docs/code-shipping.md for the defaults. The package may import the core (which container a replica
wires), the frameworks and the ground floor; the submission, the backends and the SDK use it.
"""
