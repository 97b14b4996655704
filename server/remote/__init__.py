"""The remote log tier of a tablet server: rolled segments on object storage (``file://`` or ``s3://``).

Layout under ``remote.data.dir`` (a contract with the client, which reads segments itself)::

    log/<database>/<table>-<table_id>/<bucket>/              one bucket's remote log tablet dir
        <segment_id>/<start_offset:020d>.log .index .timeindex
        manifest.json                                         the segments that exist, oldest first

Only what ``manifest.json`` lists exists: files of a segment missing from it are orphans of an
upload the manifest never recorded, and are deleted.
"""
