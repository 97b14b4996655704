"""The record batch format shared by the tablet server, remote segments and the client."""
