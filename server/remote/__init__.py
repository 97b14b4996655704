"""The remote log tier of a tablet server: rolled segments on object storage (``file://`` or ``s3://``).

Layout under ``remote.data.dir`` (a contract with the client, which reads segments itself)::

    log/<database>/<table>-<table_id>/<bucket>/              one bucket's remote log tablet dir
        <segment_id>/<start_offset:020d>.log .index .timeindex
        manifest.json                                         the segments that exist, oldest first

Only what ``manifest.json`` lists exists for readers. Files it does not name are orphans (an upload
it never recorded, a replaced leader's upload, what a failed expiry left), deleted once older than
``remote.log.orphan-grace``; those below its end only when this server wrote it in its leader
epoch. Nothing is deleted while the manifest is missing, damaged, or older than the version or the
leader epoch this server wrote (its local ``remote-log-checkpoint`` says which): ``lakelog repair
remote`` rebuilds it.
"""
