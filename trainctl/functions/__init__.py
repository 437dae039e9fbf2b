"""Function jobs: a Python function as a job's command, and its return value read back.

shipping.py decides what of a function travels to its replicas (its source, what it names, its
pickled arguments) and how its kind's framework launches it; runner.py is what every replica runs,
shipped by path into the job and importing nothing but the standard library; results.py reads rank
0's result line back, building only the types its tags name. The package may import the frameworks
and the ground floor; the core reads the runner's records of a raise (core/attribution.py).
"""
