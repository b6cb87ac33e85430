"""memstrata's own small chat agent: ``Memory.chat`` behind a REPL (see ``memstrata chat``)."""
