"""Long texts up to the model's own limit: the run that keeps q, k and the log-sum-exp, and the roles only long texts
show.
"""
