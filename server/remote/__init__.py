"""The remote log tier of a tablet server: rolled segments on object storage (``file://`` or ``s3://``).

Layout under ``remote.data.dir`` (a contract with the client, which reads segments itself)::

    log/<database>/<table>-<table_id>/<bucket>/              one bucket's remote log tablet dir
        <segment_id>/<start_offset:020d>.log .index .timeindex
        manifest.json                                         the segments that exist, oldest first

Only what ``manifest.json`` lists exists for readers. Files of a segment starting past its range are
orphans of an upload the manifest never recorded, deleted once older than ``remote.log.orphan-grace``;
nothing is deleted while the manifest is missing, damaged or older than the version this server
wrote (its local ``remote-log-checkpoint`` says which): ``lakelog repair remote`` rebuilds it.
"""
