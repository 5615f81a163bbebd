"""The web console at ``/ui``: pages for the people who look after an agent's memory.

The pages are Jinja2 templates that hold only the console's labels; their scripts (in
``static/``, no build step, nothing from a CDN) read and change memories through the
public REST routes with the API key the user signed in with, so the console can do
exactly what that key may do. ``pages.mount_console`` adds it to the FastAPI app;
``render`` (no web framework) also draws ``beeweave report``'s file.
"""
