"""What every sandboxed resources server shares: sessions, tools and the server base class."""
