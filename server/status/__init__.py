"""The coordinator's status page: the data it shows (:mod:`cluster_status`, :mod:`lake_lag_history`)
and its HTTP side on the metrics port (:mod:`status_page`, serving ``status.html``)."""
