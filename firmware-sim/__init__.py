"""Simulated sensor firmware for edgewave (`edgewave-sim`, docs/sim.md).

Data flows one way: config -> site (sensors, static triples) -> fleet (each sensor's
state machine, merged in time order, plus a scenario's injected readings) -> observation
(N-Triples per message) or payload_formats (a real device's payload) -> a sink (MQTT,
stdout, a recording); truth computes the expected matches, and the per-instance queries'
rows per window instance, from the same readings. Modules:

- ``config``: configs/sim.yaml;  ``site``: a gateway's premises and static data;
- ``sensors``: sensor kinds and value models;  ``observation``: readings as SOSA messages;
- ``payload_formats``: readings as real devices publish them (SenML, Zigbee2MQTT, Tasmota, ESPHome);
- ``fleet``: the merged stream;  ``scenario``: injected situations;  ``truth``: ground truth;
- ``simulation``: one run;  ``clock``: sim time vs wall time;  ``publisher``: sinks;
- ``recording``: recorded streams with message headers;  ``datasets``: real data (UCI);
- ``cli``: the command line.
"""
