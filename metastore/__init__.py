"""metastore: the metadata store of the Stackable Data Platform."""

__version__ = "0.2.0"
