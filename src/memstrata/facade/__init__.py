"""The collaborators the Memory facade is built from: chat, export/import, the tier views."""
