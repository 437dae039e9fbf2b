"""A real kube-apiserver + etcd for the test suite (docs/test-cluster.md).

    python -m tests.cluster up      # start one for manual work; prints the KUBECONFIG line
    python -m tests.cluster down
"""
