"""The wire between the parent and a worker: framed messages and the values they carry."""
