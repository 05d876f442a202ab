"""pymq's NameServer (the route registry). Its service lands with the server issue."""
