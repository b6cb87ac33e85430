"""The collaborators Memory is built from (``parts``), and those that span tiers: chat, transfer, keys, costs."""
