"""`trainjob-operator ui`: a read-only web UI over TrainJobs, served on the loopback with the user's kubeconfig."""
