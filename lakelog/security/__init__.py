"""Transport security and access control shared by the servers and every caller: TLS credentials
from configuration (:mod:`.tls`) and bearer tokens with the actions they allow (:mod:`.tokens`)."""
