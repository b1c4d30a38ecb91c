"""``hqval run`` as a library: the typed context (``context``), the expected cells
(``expected``), the steps (``steps``), the chain that runs them (``chain``) and hqval's own
progress display (``progress``)."""
